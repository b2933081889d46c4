package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/joiner-autoscaler/joiner/shared/catalog"
)

func runJoiner(t *testing.T, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	var out, errb bytes.Buffer
	code = dispatch(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCatalogJSONRoundTrip(t *testing.T) {
	code, out, errs := runJoiner(t, "catalog", "-o", "json")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	path := filepath.Join(t.TempDir(), "catalog.json")
	if err := os.WriteFile(path, []byte(out), 0o644); err != nil {
		t.Fatal(err)
	}
	loaded, err := catalog.Load(path)
	if err != nil {
		t.Fatalf("Load of `joiner catalog -o json` output: %v", err)
	}
	if !reflect.DeepEqual(loaded, catalog.Embedded()) {
		t.Fatal("exported catalog differs from the embedded one")
	}
	// Reading it back through --catalog gives the same bytes again.
	code, again, errs := runJoiner(t, "catalog", "-o", "json", "--catalog", path)
	if code != 0 || again != out {
		t.Fatalf("--catalog round trip: exit %d, same output %v, stderr %s", code, again == out, errs)
	}
}

func TestCatalogFamilyFilter(t *testing.T) {
	code, out, errs := runJoiner(t, "catalog", "-o", "json", "--family", "g6,inf2")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	c, err := catalog.Decode([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	if len(c.InstanceTypes) != 12 {
		t.Errorf("g6,inf2 gave %d types, want 8 + 4", len(c.InstanceTypes))
	}
	for i := range c.InstanceTypes {
		if f := c.InstanceTypes[i].Family(); f != "g6" && f != "inf2" {
			t.Errorf("filter kept %s", c.InstanceTypes[i].Name)
		}
	}
}

func TestCatalogTable(t *testing.T) {
	code, out, errs := runJoiner(t, "catalog", "--family", "m5")
	if code != 0 {
		t.Fatalf("exit %d: %s", code, errs)
	}
	var row string
	for _, l := range strings.Split(out, "\n") {
		if strings.HasPrefix(l, "m5.large ") {
			row = l
		}
	}
	fields := strings.Fields(row)
	// NAME ARCH VCPU MEMORY PODS ACCELERATOR ALLOC-CPU ALLOC-MEMORY ON-DEMAND SPOT ZONES
	if len(fields) != 11 || fields[1] != "amd64" || fields[6] != "1930m" || fields[7] != "6903Mi" || fields[8] != "0.096" || !strings.HasSuffix(fields[9], "*") {
		t.Errorf("m5.large row = %q", row)
	}
	if !strings.Contains(out, "9 instance types") || !strings.Contains(out, "estimate") {
		t.Errorf("table footer missing:\n%s", out)
	}
}

func TestCatalogErrors(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "bad.json")
	if err := os.WriteFile(bad, []byte(`{"region":"r","instanceTypes":[{"name":"a.large","arch":"x86","vcpu":0,"memoryMiB":1,"maxPods":1,"offerings":[{"zone":"z","capacityType":"spot","pricePerHour":1,"available":true}]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		args []string
		code int
		want string
	}{
		{[]string{"catalog", "-o", "yaml"}, 2, `unknown format "yaml"`},
		{[]string{"catalog", "--nope"}, 2, "flag provided but not defined"},
		{[]string{"catalog", "extra"}, 2, `unexpected argument "extra"`},
		{[]string{"catalog", "--family", "zz9"}, 1, "no instance type in that family"},
		{[]string{"catalog", "--catalog", bad}, 1, `instanceTypes[0] (a.large): vcpu: must be positive`},
		{[]string{"catalog", "--catalog", bad}, 1, `arch: unknown architecture "x86"`},
		{[]string{"catalog", "--catalog", filepath.Join(t.TempDir(), "missing.json")}, 1, "missing.json"},
	} {
		code, _, errs := runJoiner(t, tc.args...)
		if code != tc.code || !strings.Contains(errs, tc.want) {
			t.Errorf("%v: exit %d, stderr %q; want exit %d and %q", tc.args, code, errs, tc.code, tc.want)
		}
	}
	if code, _, _ := runJoiner(t, "catalog", "-h"); code != 0 {
		t.Errorf("-h exits %d", code)
	}
}
