package cloud

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/aws/aws-sdk-go-v2/aws"
	"github.com/aws/aws-sdk-go-v2/service/ec2"
	ec2types "github.com/aws/aws-sdk-go-v2/service/ec2/types"
	"github.com/aws/aws-sdk-go-v2/service/iam"
)

// The names Karpenter v1.0–v1.9 gives the profile of a class: cluster, "_", and
// hashstructure v2.0.2's hash (FNV-1 64) of region+name. The expected numbers
// were computed with hashstructure.Hash(region+name, FormatV2, nil) itself.
func TestInstanceProfileNameIsKarpenters(t *testing.T) {
	for _, tc := range []struct{ cluster, region, class, want string }{
		{"prod", "us-east-1", "default", "prod_15843455441266977890"},
		{"kubean-prod", "us-west-2", "gpu-pool", "kubean-prod_723837953979366499"},
	} {
		if got := InstanceProfileName(tc.cluster, tc.region, tc.class); got != tc.want {
			t.Errorf("InstanceProfileName(%s, %s, %s) = %s, want %s", tc.cluster, tc.region, tc.class, got, tc.want)
		}
	}
}

// wantProfile checks, on the backend itself, that a profile exists, holds the
// role and carries the identity tags Karpenter's reference policy conditions on.
func (e *env) wantProfile(name, role, class string) {
	e.t.Helper()
	out, err := iam.NewFromConfig(e.direct).GetInstanceProfile(context.Background(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if err != nil {
		e.t.Fatalf("instance profile %s: %v", name, err)
	}
	ip := out.InstanceProfile
	if len(ip.Roles) != 1 || aws.ToString(ip.Roles[0].RoleName) != role {
		e.t.Errorf("profile %s holds %+v, want role %s", name, ip.Roles, role)
	}
	tags := map[string]string{}
	for _, tg := range ip.Tags {
		tags[aws.ToString(tg.Key)] = aws.ToString(tg.Value)
	}
	want := map[string]string{"kubernetes.io/cluster/" + testCluster: "owned", TagEKSClusterName: testCluster,
		TagNodeClass: class, TagRegion: testRegion}
	for k, v := range want {
		if tags[k] != v {
			e.t.Errorf("profile %s tag %s = %q, want %q (all: %v)", name, k, tags[k], v, tags)
		}
	}
}

func (e *env) profileExists(name string) bool {
	e.t.Helper()
	_, err := iam.NewFromConfig(e.direct).GetInstanceProfile(context.Background(), &iam.GetInstanceProfileInput{InstanceProfileName: aws.String(name)})
	if ErrorCode(err) == codeNoSuchEntity {
		return false
	}
	e.must(err)
	return true
}

// A class with spec.role: the first launch creates the profile (the role exists,
// the profile does not), later invocations reuse it, the container's cache spares
// IAM calls, a role change moves the profile to the new role, and deleting the
// class's profile leaves nothing behind.
func TestInstanceProfileFromRole(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("al2023.yaml")
		name := InstanceProfileName(testCluster, testRegion, nc.Name)
		if e.profileExists(name) {
			t.Fatalf("profile %s exists before any launch", name)
		}
		cache := NewInstanceProfileCache(e.clock.Now)
		withCache := func(c *Config) { c.InstanceProfiles = cache }
		inst, err := e.provider(withCache).Launch(ctx, cpuRequest(nc, "general-1", []string{"m6i.large"}, nil))
		if err != nil {
			t.Fatal(err)
		}
		e.wantProfile(name, testRole, nc.Name)
		if got := aws.ToString(e.templateData(inst.LaunchTemplate).IamInstanceProfile.Name); got != name {
			t.Errorf("launch template names profile %q, want %s", got, name)
		}
		if n := e.proxy.count("CreateInstanceProfile"); n != 1 {
			t.Errorf("CreateInstanceProfile called %d times, want 1", n)
		}
		// A second invocation of the same warm container asks IAM nothing.
		if _, err := e.provider(withCache).Launch(ctx, cpuRequest(nc, "general-2", []string{"m6i.large"}, nil)); err != nil {
			t.Fatal(err)
		}
		if n := e.proxy.count("GetInstanceProfile"); n != 1 {
			t.Errorf("GetInstanceProfile called %d times, want 1 (the container caches the profile)", n)
		}
		// A cold container finds the profile and creates nothing.
		if _, err := e.provider().InstanceProfile(ctx, nc); err != nil {
			t.Fatal(err)
		}
		if n := e.proxy.count("CreateInstanceProfile"); n != 1 {
			t.Errorf("a cold container created the profile again (%d creations)", n)
		}

		// The class's role changes: the same profile now holds the new role.
		other := "KarpenterNodeRole-other"
		_, err = iam.NewFromConfig(e.direct).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(other), AssumeRolePolicyDocument: aws.String("{}")})
		e.must(err)
		nc.Spec.Role = other
		if _, err := e.provider().InstanceProfile(ctx, nc); err != nil {
			t.Fatal(err)
		}
		e.wantProfile(name, other, nc.Name)

		deleted, err := e.provider().DeleteInstanceProfile(ctx, nc.Name)
		if err != nil || !deleted {
			t.Fatalf("DeleteInstanceProfile = %v, %v", deleted, err)
		}
		if e.profileExists(name) {
			t.Errorf("profile %s still exists after its class's deletion", name)
		}
		if deleted, err := e.provider().DeleteInstanceProfile(ctx, nc.Name); err != nil || deleted {
			t.Errorf("deleting a deleted profile: %v, %v; want nothing to do", deleted, err)
		}
	})
}

// A profile with Joiner's name that Joiner did not tag is never changed or deleted.
func TestInstanceProfileNotOursIsLeftAlone(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("al2023.yaml")
		name := InstanceProfileName(testCluster, testRegion, nc.Name)
		c := iam.NewFromConfig(e.direct)
		_, err := c.CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String("someone-elses"), AssumeRolePolicyDocument: aws.String("{}")})
		e.must(err)
		_, err = c.CreateInstanceProfile(ctx, &iam.CreateInstanceProfileInput{InstanceProfileName: aws.String(name)})
		e.must(err)
		_, err = c.AddRoleToInstanceProfile(ctx, &iam.AddRoleToInstanceProfileInput{InstanceProfileName: aws.String(name), RoleName: aws.String("someone-elses")})
		e.must(err)
		_, err = e.provider().InstanceProfile(ctx, nc)
		if err == nil || !strings.Contains(err.Error(), "lacks this cluster's tags") {
			t.Fatalf("want a refusal naming the missing tags, got %v", err)
		}
		if deleted, err := e.provider().DeleteInstanceProfile(ctx, nc.Name); err != nil || deleted {
			t.Errorf("DeleteInstanceProfile of a profile Joiner did not tag: %v, %v", deleted, err)
		}
		if !e.profileExists(name) {
			t.Error("a profile Joiner did not tag was deleted")
		}
	})
}

// A role that does not exist fails the launch with a message naming it, and
// nothing is launched.
func TestInstanceProfileMissingRole(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		nc := e.loadClass("al2023.yaml")
		nc.Spec.Role = "NoSuchRole"
		_, err := e.provider().Launch(context.Background(), cpuRequest(nc, "general-1", []string{"m6i.large"}, nil))
		if err == nil || !strings.Contains(err.Error(), "role NoSuchRole does not exist") {
			t.Fatalf("want an error naming the missing role, got %v", err)
		}
		if n := e.proxy.count("CreateFleet"); n != 0 {
			t.Errorf("%d CreateFleet calls for a class whose role does not exist", n)
		}
	})
}

// DRY_RUN creates no profile: IAM has no dry run, so the missing profile is
// reported as a dry-run answer and the launch is checked with its name.
func TestInstanceProfileDryRun(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		nc := e.loadClass("al2023.yaml")
		p := e.provider(func(c *Config) { c.DryRun = true })
		if _, err := p.Launch(context.Background(), cpuRequest(nc, "dry-1", []string{"m6i.large"}, nil)); err != nil {
			t.Fatal(err)
		}
		if n := e.proxy.count("CreateInstanceProfile") + e.proxy.count("AddRoleToInstanceProfile"); n != 0 {
			t.Errorf("%d IAM writes in DRY_RUN", n)
		}
		found := false
		for _, r := range p.DryRuns() {
			if r.Operation == "CreateInstanceProfile" && r.Target == InstanceProfileName(testCluster, testRegion, nc.Name) {
				found = true
			}
		}
		if !found {
			t.Errorf("dry runs %+v lack the profile Joiner would create", p.DryRuns())
		}
	})
}

// The RunInstances path on both backends (moto checks instance profiles on
// RunInstances, not on CreateFleet): a profile Joiner readied for a role it did
// not create launches; a profile that does not exist is refused. awssim answers
// as EC2 does (InvalidParameterValue "Value (…) for parameter
// iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name", the
// answer Karpenter users meet: aws/karpenter-provider-aws#3051); moto 5.2.1
// answers NoSuchEntity.
func TestInstanceProfileRunInstances(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("al2023.yaml")
		name, err := e.provider().InstanceProfile(ctx, nc)
		if err != nil {
			t.Fatal(err)
		}
		run := func(profile string) error {
			_, err := e.ec2.RunInstances(ctx, &ec2.RunInstancesInput{
				ImageId: aws.String(e.amiX86), InstanceType: ec2types.InstanceTypeM6iLarge, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
				SubnetId: aws.String(e.subnets["us-east-1a"]), IamInstanceProfile: &ec2types.IamInstanceProfileSpecification{Name: aws.String(profile)},
			})
			return err
		}
		if err := run(name); err != nil {
			t.Fatalf("RunInstances with the profile Joiner made: %v", err)
		}
		err = run("no-such-profile")
		want := map[string]string{"awssim": "InvalidParameterValue", "moto": codeNoSuchEntity}[e.kind]
		if ErrorCode(err) != want {
			t.Fatalf("RunInstances with a missing profile: %v, want %s", err, want)
		}
		if e.kind == "awssim" && !strings.Contains(err.Error(), "Value (no-such-profile) for parameter iamInstanceProfile.name is invalid. Invalid IAM Instance Profile name") {
			t.Errorf("awssim's message is not EC2's: %v", err)
		}
	})
}

// spec.instanceProfile is used as given; one that does not exist fails the
// launch with EC2's error in the fleet's errors (awssim; moto does not check
// profiles on CreateFleet, so only the simulator can show it).
func TestInstanceProfileGivenButMissing(t *testing.T) {
	e := newEnvFor(t, "awssim")
	nc := e.loadClass("al2023.yaml")
	missing := "NotCreatedByAnyone"
	nc.Spec.InstanceProfile = &missing
	_, err := e.provider().Launch(context.Background(), cpuRequest(nc, "general-1", []string{"m6i.large"}, nil))
	if err == nil || !strings.Contains(err.Error(), "InvalidParameterValue") || !strings.Contains(err.Error(), "Invalid IAM Instance Profile name") {
		t.Fatalf("want EC2's InvalidParameterValue for the missing profile, got %v", err)
	}
	if n := e.proxy.count("CreateInstanceProfile"); n != 0 {
		t.Errorf("Joiner created a profile for a class that names its own (%d)", n)
	}
	if len(e.runningInstances()) != 0 {
		t.Error("an instance launched with a profile that does not exist")
	}
}

// TestCollectInstanceProfilesOfDeletedClasses: the consolidator's round deletes
// the profile Joiner created for an EC2NodeClass that was deleted, only once no
// instance holds it (here one launched by someone else, with RunInstances), and
// cheaply: one ListInstanceProfiles per container, then IAM only for a class
// that disappeared or a profile still waiting to go.
func TestCollectInstanceProfilesOfDeletedClasses(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		gone := e.loadClass("al2023.yaml")
		kept := e.loadClass("al2023.yaml")
		kept.Name = "kept"
		goneName, err := e.provider().InstanceProfile(ctx, gone)
		e.must(err)
		keptName, err := e.provider().InstanceProfile(ctx, kept)
		e.must(err)
		out, err := e.ec2.RunInstances(ctx, &ec2.RunInstancesInput{
			ImageId: aws.String(e.amiX86), InstanceType: ec2types.InstanceTypeM6iLarge, MinCount: aws.Int32(1), MaxCount: aws.Int32(1),
			SubnetId: aws.String(e.subnets["us-east-1a"]), IamInstanceProfile: &ec2types.IamInstanceProfileSpecification{Name: aws.String(goneName)},
		})
		e.must(err)
		holder := aws.ToString(out.Instances[0].InstanceId)

		cache := NewInstanceProfileCache(e.clock.Now)
		round := func(live ...string) []string {
			t.Helper()
			deleted, err := e.provider(func(c *Config) { c.InstanceProfiles = cache }).CollectInstanceProfiles(ctx, live)
			if err != nil {
				t.Fatal(err)
			}
			return deleted
		}
		// The class is gone (deleted before this container's first round), but an
		// instance still holds its profile.
		if d := round("kept"); len(d) != 0 || !e.profileExists(goneName) {
			t.Fatalf("deleted %v while instance %s holds %s", d, holder, goneName)
		}
		if d := round("kept"); len(d) != 0 || !e.profileExists(goneName) {
			t.Fatalf("second round deleted %v while %s holds it", d, holder)
		}
		if n := e.proxy.count("ListInstanceProfiles"); n != 1 {
			t.Errorf("ListInstanceProfiles called %d times in two rounds, want 1 (once per container)", n)
		}
		_, err = e.ec2.TerminateInstances(ctx, &ec2.TerminateInstancesInput{InstanceIds: []string{holder}})
		e.must(err)
		e.clock.Advance(5 * time.Minute) // shutting-down, then terminated
		if d := round("kept"); !slices.Equal(d, []string{goneName}) || e.profileExists(goneName) {
			t.Fatalf("after the holder terminated: deleted %v (want %s)", d, goneName)
		}
		if !e.profileExists(keptName) {
			t.Fatalf("the live class's profile %s was deleted", keptName)
		}
		// Nothing changed: the round asks IAM nothing.
		gets := e.proxy.count("GetInstanceProfile")
		if d := round("kept"); len(d) != 0 || e.proxy.count("GetInstanceProfile") != gets {
			t.Errorf("a round with no class gone deleted %v and read %d profile(s)", d, e.proxy.count("GetInstanceProfile")-gets)
		}
		// The other class goes too, later: found from the last round's classes.
		if d := round(); !slices.Equal(d, []string{keptName}) || e.profileExists(keptName) {
			t.Errorf("class %s deleted: deleted %v, want %s", kept.Name, d, keptName)
		}
		if n := e.proxy.count("ListInstanceProfiles"); n != 1 {
			t.Errorf("ListInstanceProfiles called %d times, want 1", n)
		}
	})
}

// Shadow mode's planners read IAM and write nothing: a class whose profile is
// missing plans its creation holding the role, once per container; a profile
// holding the class's role plans nothing; a role change plans the new role in
// place of the old; the profile of a deleted class plans its deletion, once.
func TestPlanInstanceProfiles(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		ctx := context.Background()
		nc := e.loadClass("al2023.yaml")
		name := InstanceProfileName(testCluster, testRegion, nc.Name)
		cache := NewInstanceProfileCache(e.clock.Now)
		shadow := func() *Provider { return e.provider(func(c *Config) { c.InstanceProfiles = cache }) }
		writes := func() int {
			return e.proxy.count("CreateInstanceProfile") + e.proxy.count("AddRoleToInstanceProfile") +
				e.proxy.count("RemoveRoleFromInstanceProfile") + e.proxy.count("DeleteInstanceProfile")
		}
		plan := func(p *Provider) []string {
			t.Helper()
			changes, err := p.PlanInstanceProfile(ctx, nc)
			if err != nil {
				t.Fatal(err)
			}
			return changeStrings(changes)
		}
		want := []string{"CreateInstanceProfile " + name, "AddRoleToInstanceProfile " + name + " role " + testRole}
		if got := plan(shadow()); !slices.Equal(got, want) {
			t.Errorf("missing profile: planned %q, want %q", got, want)
		}
		if got := plan(shadow()); len(got) != 0 {
			t.Errorf("the same container planned the creation again: %q", got)
		}
		if n := writes(); n != 0 || e.profileExists(name) {
			t.Fatalf("planning wrote to IAM (%d writes, profile exists %v)", n, e.profileExists(name))
		}

		if _, err := e.provider().InstanceProfile(ctx, nc); err != nil {
			t.Fatal(err)
		}
		before := writes()
		if got := plan(e.provider()); len(got) != 0 {
			t.Errorf("a profile holding the role: planned %q", got)
		}
		other := "KarpenterNodeRole-other"
		_, err := iam.NewFromConfig(e.direct).CreateRole(ctx, &iam.CreateRoleInput{RoleName: aws.String(other), AssumeRolePolicyDocument: aws.String("{}")})
		e.must(err)
		nc.Spec.Role = other
		want = []string{"AddRoleToInstanceProfile " + name + " role " + other + " replacing " + testRole}
		if got := plan(e.provider()); !slices.Equal(got, want) {
			t.Errorf("role change: planned %q, want %q", got, want)
		}
		e.wantProfile(name, testRole, nc.Name)

		collect := func() []string {
			t.Helper()
			changes, err := shadow().PlanCollectInstanceProfiles(ctx, []string{"another"})
			if err != nil {
				t.Fatal(err)
			}
			return changeStrings(changes)
		}
		if got := collect(); !slices.Equal(got, []string{"DeleteInstanceProfile " + name}) {
			t.Errorf("deleted class: planned %q, want its profile's deletion", got)
		}
		if got := collect(); len(got) != 0 {
			t.Errorf("the same container planned the deletion again: %q", got)
		}
		if n := writes(); n != before || !e.profileExists(name) {
			t.Errorf("planning wrote to IAM (%d writes, profile exists %v)", n-before, e.profileExists(name))
		}
	})
}

// Launches of one class run concurrently (the provisioner launches a burst's
// nodes 32 at a time): the class's profile and launch template are readied once,
// not once per launch; a second AddRoleToInstanceProfile would fail with
// LimitExceeded, since a profile holds one role.
func TestConcurrentLaunchesReadyTheProfileOnce(t *testing.T) {
	forEachBackend(t, func(t *testing.T, e *env) {
		nc := e.loadClass("al2023.yaml")
		p := e.provider()
		const n = 12
		errs := make([]error, n)
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, errs[i] = p.Launch(context.Background(), cpuRequest(nc, fmt.Sprintf("general-%d", i), []string{"m6i.large"}, nil))
			}()
		}
		wg.Wait()
		for i, err := range errs {
			if err != nil {
				t.Errorf("launch %d: %v", i, err)
			}
		}
		e.wantProfile(InstanceProfileName(testCluster, testRegion, nc.Name), testRole, nc.Name)
		for _, action := range []string{"CreateInstanceProfile", "AddRoleToInstanceProfile", "CreateLaunchTemplate"} {
			if c := e.proxy.count(action); c != 1 {
				t.Errorf("%s called %d times for %d concurrent launches, want 1", action, c, n)
			}
		}
	})
}

// changeStrings is each planned profile change as it prints.
func changeStrings[C fmt.Stringer](changes []C) []string {
	out := make([]string, 0, len(changes))
	for _, c := range changes {
		out = append(out, c.String())
	}
	return out
}
