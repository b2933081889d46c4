// Package kubetest starts a real etcd + kube-apiserver on loopback for integration
// tests (controller-runtime's envtest) with Joiner's deploy/ CRDs installed, and
// beside it, on demand, the real kube-scheduler (default profile) and the KWOK
// controller (node heartbeats, pod lifecycle), so tests judge placements by the
// scheduler a cluster runs. The binaries come from KUBEBUILDER_ASSETS or
// $KAPI_PREFIX/bin (built by `make kube-assets`, i.e. scripts/kube-assets.sh). When
// one is missing a test fails under `make test` (JOINER_REQUIRE_REAL_PARTS=1) or in
// CI (CI=true), and is skipped elsewhere with a message saying how to build them.
package kubetest

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"sigs.k8s.io/controller-runtime/pkg/envtest"
)

// Env is a running control plane.
type Env struct {
	// Config is an admin (system:masters) client configuration.
	Config *rest.Config
	// Kubeconfig is the path of a kubeconfig for the admin user (for kubectl).
	Kubeconfig string
	// RepoRoot is the repository root (where go.mod is).
	RepoRoot string
	// EtcdURL is etcd's client URL (its v3 JSON gateway answers there too), for
	// tests that write objects straight into storage (the scale benchmark).
	EtcdURL string
	env     *envtest.Environment
	dir     string
}

// MissingAssetsMessage says how to get the binaries.
const MissingAssetsMessage = "etcd/kube-apiserver test binaries not found: run `make kube-assets` (scripts/kube-assets.sh builds them into $KAPI_PREFIX/bin; ~20 min the first time)"

// AssetsDir returns the directory holding etcd and kube-apiserver.
func AssetsDir() (string, error) {
	var dirs []string
	if d := os.Getenv("KUBEBUILDER_ASSETS"); d != "" {
		dirs = append(dirs, d)
	}
	if p := os.Getenv("KAPI_PREFIX"); p != "" {
		dirs = append(dirs, filepath.Join(p, "bin"))
	}
	cache := os.Getenv("XDG_CACHE_HOME")
	if cache == "" {
		if home, err := os.UserHomeDir(); err == nil {
			cache = filepath.Join(home, ".cache")
		}
	}
	if cache != "" {
		dirs = append(dirs, filepath.Join(cache, "joiner", "kapi", "bin"))
	}
	for _, d := range dirs {
		if isExec(filepath.Join(d, "etcd")) && isExec(filepath.Join(d, "kube-apiserver")) {
			return d, nil
		}
	}
	return "", fmt.Errorf("%s (looked in %v)", MissingAssetsMessage, dirs)
}

func isExec(p string) bool {
	st, err := os.Stat(p)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// RepoRoot walks up from the working directory to the directory holding go.mod.
func RepoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("go.mod not found above the working directory")
		}
		dir = parent
	}
}

// Start starts a control plane with deploy/crds installed.
func Start() (*Env, error) { return StartWith(Options{}) }

// Options change how StartWith configures the control plane.
type Options struct {
	// ServiceAccountIssuer is kube-apiserver's --service-account-issuer, the "iss" of
	// the service-account tokens it issues; empty keeps envtest's. An IAM OIDC
	// provider (IRSA) needs an https URL without a port.
	ServiceAccountIssuer string
	// EtcdDataDir keeps etcd's data there (and leaves it on Stop), so a populated
	// cluster can be reused by the next run; empty uses a temporary directory.
	EtcdDataDir string
	// APIServerFlags are more kube-apiserver flags, by name without the dashes: an
	// EKS cluster's token authenticator, for one, is a TokenReview webhook
	// (authentication-token-webhook-config-file).
	APIServerFlags map[string]string
}

// StartWith starts a control plane with deploy/crds installed, configured by opts.
func StartWith(opts Options) (*Env, error) {
	assets, err := AssetsDir()
	if err != nil {
		return nil, err
	}
	root, err := RepoRoot()
	if err != nil {
		return nil, err
	}
	te := &envtest.Environment{
		BinaryAssetsDirectory:   assets,
		CRDDirectoryPaths:       []string{filepath.Join(root, "deploy", "crds")},
		ErrorIfCRDPathMissing:   true,
		ControlPlaneStopTimeout: 30 * time.Second,
		// envtest's default (20 s) is too short for kube-apiserver on a loaded 2-core
		// machine: tests failed with "timeout waiting for process kube-apiserver".
		ControlPlaneStartTimeout: 2 * time.Minute,
	}
	if opts.EtcdDataDir != "" {
		te.ControlPlane.Etcd = &envtest.Etcd{DataDir: opts.EtcdDataDir}
	}
	if opts.ServiceAccountIssuer != "" {
		te.ControlPlane.GetAPIServer().Configure().Set("service-account-issuer", opts.ServiceAccountIssuer)
	}
	for name, value := range opts.APIServerFlags {
		te.ControlPlane.GetAPIServer().Configure().Set(name, value)
	}
	cfg, err := te.Start()
	if err != nil {
		return nil, fmt.Errorf("start etcd + kube-apiserver from %s: %w", assets, err)
	}
	e := &Env{Config: cfg, RepoRoot: root, env: te}
	if etcd := te.ControlPlane.Etcd; etcd != nil && etcd.URL != nil {
		e.EtcdURL = etcd.URL.String()
	}
	if e.dir, err = os.MkdirTemp("", "kubetest-"); err != nil {
		_ = te.Stop()
		return nil, err
	}
	e.Kubeconfig = filepath.Join(e.dir, "kubeconfig")
	if err := WriteKubeconfig(cfg, e.Kubeconfig); err != nil {
		_ = e.Stop()
		return nil, err
	}
	return e, nil
}

// Stop stops the control plane.
func (e *Env) Stop() error {
	if e == nil {
		return nil
	}
	if e.dir != "" {
		_ = os.RemoveAll(e.dir)
	}
	return e.env.Stop()
}

// Impersonate returns a copy of the admin configuration acting as user in groups.
func (e *Env) Impersonate(user string, groups ...string) *rest.Config {
	cfg := rest.CopyConfig(e.Config)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user, Groups: groups}
	return cfg
}

// WriteKubeconfig writes cfg (client-certificate auth, verified TLS) as a kubeconfig.
func WriteKubeconfig(cfg *rest.Config, path string) error {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["test"] = &clientcmdapi.Cluster{Server: cfg.Host, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["admin"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData, Token: cfg.BearerToken}
	kc.Contexts["test"] = &clientcmdapi.Context{Cluster: "test", AuthInfo: "admin"}
	kc.CurrentContext = "test"
	return clientcmd.WriteToFile(*kc, path)
}

var shared struct {
	once sync.Once
	env  *Env
	err  error
}

// Shared returns the package's control plane, starting it (and installing deploy/
// with ApplyDeploy) on first use, so runs of unit tests alone start nothing.
// Missing binaries fail the test in CI and skip it elsewhere; call StopShared from
// TestMain after m.Run.
func Shared(t testing.TB) *Env {
	t.Helper()
	if _, err := AssetsDir(); err != nil {
		Need(t, nil)
	}
	shared.once.Do(func() {
		shared.env, shared.err = Start()
		if shared.err == nil {
			if out, err := shared.env.ApplyDeploy(); err != nil {
				shared.err = fmt.Errorf("kubectl %s: %v\n%s", strings.Join(ApplyDeployArgs("deploy"), " "), err, out)
			}
		}
	})
	if shared.err != nil {
		t.Fatal(shared.err)
	}
	return shared.env
}

// StopShared stops the control plane Shared started, and the scheduler and KWOK
// SharedScheduling started beside it, if any.
func StopShared() {
	_ = stopSharedScheduling()
	if shared.env != nil {
		_ = shared.env.Stop()
	}
}

// ApplyDeployArgs are the kubectl arguments that install deploy/ (dir), as the README
// says to: server-side apply as field manager "joiner", so that Karpenter CRDs
// another manager installed (Helm, a newer Karpenter) are not overwritten: a field
// whose value differs is a conflict kubectl reports, and nothing of that CRD changes.
func ApplyDeployArgs(dir string) []string {
	return []string{"apply", "--server-side", "--field-manager=joiner", "-k", dir}
}

// ApplyDeploy installs the repository's deploy/ with ApplyDeployArgs.
func (e *Env) ApplyDeploy() (string, error) {
	return e.Kubectl(ApplyDeployArgs(filepath.Join(e.RepoRoot, "deploy"))...)
}

// Kubectl runs kubectl (KUBECTL or the one on PATH) against the control plane.
func (e *Env) Kubectl(args ...string) (string, error) {
	bin := os.Getenv("KUBECTL")
	if bin == "" {
		bin = "kubectl"
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", e.Kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// Need fails (make test, CI) or skips (a plain go test) t when env did not start
// because the binaries are missing.
func Need(t testing.TB, env *Env) {
	t.Helper()
	if env != nil {
		return
	}
	_, err := AssetsDir()
	if err == nil {
		err = errors.New("control plane not started")
	}
	missing(t, err)
}

// missing fails t when real parts are required (`make test` sets
// JOINER_REQUIRE_REAL_PARTS=1; CI sets CI=true) and skips it otherwise, saying why.
func missing(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" || os.Getenv("JOINER_REQUIRE_REAL_PARTS") == "1" {
		t.Fatal(err)
	}
	t.Skip(err)
}
