package nodeboot

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/joiner-autoscaler/joiner/shared/awssim"
)

// script is one shell script cloud-init runs.
type script struct{ name, body string }

// ScriptTimeout bounds one boot's scripts.
const ScriptTimeout = 60 * time.Second

// overlaid are the directories a script's writes go to copies of. /tmp is the
// host's (the sandbox's own files live there).
var overlaid = []string{"/etc", "/var", "/opt", "/root"}

// recorders are the commands replaced by recorders: the node agents and what a
// join script does to the machine.
var recorders = []string{"systemctl", "kubeadm", "nodeadm", "nvidia-smi", "logger", "modprobe", "sysctl", "swapoff", "hostnamectl"}

// setupScript runs inside the new user and mount namespace: it lays a
// copy-on-write overlay over each directory the scripts may write, keeps the
// host console out of reach, then runs the scripts in order, as cloud-init
// does, stopping at the first that fails.
const setupScript = `set -e
for d in ${JOINER_OVERLAID}; do
  [ -d "$d" ] || continue
  mkdir -p "$JOINER_BOOT/upper$d" "$JOINER_BOOT/work$d"
  mount -t overlay overlay -o "lowerdir=$d,upperdir=$JOINER_BOOT/upper$d,workdir=$JOINER_BOOT/work$d" "$d"
done
[ -e /dev/console ] && mount --bind /dev/null /dev/console
mkdir -p /etc/eks
cp "$JOINER_BOOT/bin/bootstrap.sh" /etc/eks/bootstrap.sh
cd /
set +e
for s in "$@"; do
  "$s" </dev/null
  rc=$?
  if [ $rc -ne 0 ]; then
    echo "joiner-nodeboot: $(basename "$s") exited $rc" >&2
    exit $rc
  fi
done
`

// record is the start of every recorder: it writes the command's name and
// arguments, NUL-separated, to a file named by the time, so the files list in
// call order. Builtins only: a machine under load spawns processes slowly.
const record = `printf -v f '%s/rec/%s-%08d' "$JOINER_BOOT" "${EPOCHREALTIME/./}" "$$"
printf '%s\0' "$JOINER_NAME" "$@" > "$f"
`

// awsScript is the AWS CLI as far as a join script uses it: reading the
// bootstrap token from SSM or Secrets Manager, answered from the simulator.
const awsScript = `name=
svc="$1 $2"
while [ $# -gt 0 ]; do
  case "$1" in
    --name|--secret-id) name="$2"; shift ;;
    --name=*|--secret-id=*) name="${1#*=}" ;;
  esac
  shift
done
case "$svc" in
  "ssm get-parameter"|"secretsmanager get-secret-value")
    f="$JOINER_BOOT/store/${name//\//%2F}"
    if [ -f "$f" ]; then printf '%s\n' "$(<"$f")"; exit 0; fi
    echo "An error occurred (ResourceNotFoundException/ParameterNotFound): $name not found" >&2
    exit 254 ;;
esac
exit 0
`

// curlScript points the metadata address at the emulator.
const curlScript = `#!/bin/bash
exec "$JOINER_REAL_CURL" --connect-to "169.254.169.254:80:127.0.0.1:$JOINER_IMDS_PORT" --connect-to "[fd00:ec2::254]:80:127.0.0.1:$JOINER_IMDS_PORT" "$@"
`

var (
	availableOnce sync.Once
	availableErr  error
)

// Available reports whether shell user data can be executed here: bash, curl
// and unshare present, and an unprivileged user namespace that may mount an
// overlay over /etc.
func Available() error {
	availableOnce.Do(func() {
		for _, tool := range []string{"bash", "curl", "unshare"} {
			if _, err := exec.LookPath(tool); err != nil {
				availableErr = fmt.Errorf("%s not found: %w", tool, err)
				return
			}
		}
		dir, err := os.MkdirTemp("", "joiner-nodeboot-probe-")
		if err != nil {
			availableErr = err
			return
		}
		defer os.RemoveAll(dir)
		out, err := exec.Command("unshare", "-rm", "sh", "-c",
			`mkdir -p "$1/u" "$1/w" && mount -t overlay overlay -o "lowerdir=/etc,upperdir=$1/u,workdir=$1/w" /etc`, "probe", dir).CombinedOutput()
		if err != nil {
			availableErr = fmt.Errorf("no user namespace with an overlay mount (unshare -rm, mount -t overlay): %v: %s", err, strings.TrimSpace(string(out)))
		}
	})
	return availableErr
}

// runScripts runs the scripts in the sandbox with the metadata service served on
// loopback, then reads the join from what they did.
func runScripts(ctx context.Context, m *awssim.IMDS, store map[string]string, scripts []script) Result {
	unshare, err := exec.LookPath("unshare")
	if err != nil {
		return Result{Err: fmt.Errorf("cannot run user data: %w (util-linux's unshare is needed)", err)}
	}
	curl, err := exec.LookPath("curl")
	if err != nil {
		return Result{Err: fmt.Errorf("cannot run user data: %w", err)}
	}
	dir, err := os.MkdirTemp("", "joiner-nodeboot-")
	if err != nil {
		return Result{Err: err}
	}
	defer os.RemoveAll(dir)
	if err := prepare(dir, scripts); err != nil {
		return Result{Err: fmt.Errorf("cannot run user data: %w", err)}
	}
	for name, value := range store {
		if err := os.WriteFile(secretFile(dir, name), []byte(value), 0o600); err != nil {
			return Result{Err: err}
		}
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return Result{Err: fmt.Errorf("cannot serve the metadata service: %w", err)}
	}
	srv := &http.Server{Handler: m, ReadHeaderTimeout: 10 * time.Second}
	go func() { _ = srv.Serve(ln) }()
	defer srv.Close()

	ctx, cancel := context.WithTimeout(ctx, ScriptTimeout)
	defer cancel()
	args := []string{"-rm", "bash", filepath.Join(dir, "bin", ".setup")}
	for _, s := range scripts {
		args = append(args, filepath.Join(dir, "scripts", s.name))
	}
	cmd := exec.CommandContext(ctx, unshare, args...)
	cmd.Env = []string{
		"PATH=" + filepath.Join(dir, "bin") + ":/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
		"HOME=/root", "LANG=C.UTF-8",
		"JOINER_BOOT=" + dir, "JOINER_REAL_CURL=" + curl, "JOINER_OVERLAID=" + strings.Join(overlaid, " "),
		"JOINER_IMDS_PORT=" + strconv.Itoa(ln.Addr().(*net.TCPAddr).Port),
	}
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.WaitDelay = 5 * time.Second
	runErr := cmd.Run()
	r := Result{Output: tail(out.String(), 4000)}
	if r.Calls, err = readCalls(filepath.Join(dir, "rec")); err != nil {
		r.Err = err
		return r
	}
	if runErr != nil {
		if ctx.Err() != nil {
			runErr = fmt.Errorf("still running after %s", ScriptTimeout)
		}
		r.Err = fmt.Errorf("user data failed: %v: %s", runErr, lastLines(out.String(), 3))
		return r
	}
	r.Join, r.Err = joinFromCalls(r.Calls, filepath.Join(dir, "upper"), m)
	return r
}

// prepare writes the recorders, shims and scripts into dir.
func prepare(dir string, scripts []script) error {
	for _, d := range []string{"bin", "rec", "scripts", "store", "upper", "work"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			return err
		}
	}
	stub := func(name, rest string) string { return "#!/bin/bash\nJOINER_NAME=" + name + "\n" + record + rest }
	files := map[string]string{".setup": setupScript, "curl": curlScript,
		"aws": stub("aws", awsScript), "bootstrap.sh": stub("/etc/eks/bootstrap.sh", "")}
	for _, name := range recorders {
		files[name] = stub(name, "")
	}
	// logger reads what the script pipes to it.
	files["logger"] = stub("logger", "while read -r _; do :; done\n")
	for name, body := range files {
		if err := os.WriteFile(filepath.Join(dir, "bin", name), []byte(body), 0o755); err != nil {
			return err
		}
	}
	for _, s := range scripts {
		if err := os.WriteFile(filepath.Join(dir, "scripts", s.name), []byte(s.body), 0o755); err != nil {
			return err
		}
	}
	return nil
}

// readCalls reads the recorded calls in order.
func readCalls(dir string) ([]Call, error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	names := make([]string, 0, len(entries))
	for _, e := range entries {
		names = append(names, e.Name())
	}
	slices.Sort(names)
	var calls []Call
	for _, n := range names {
		raw, err := os.ReadFile(filepath.Join(dir, n))
		if err != nil {
			return nil, err
		}
		fields := strings.Split(strings.TrimSuffix(string(raw), "\x00"), "\x00")
		calls = append(calls, Call{Name: fields[0], Args: fields[1:]})
	}
	return calls, nil
}

// bootstrapShOptions are the options of the EKS AL2 /etc/eks/bootstrap.sh (its
// print_help, amazon-eks-ami templates/al2/runtime/bootstrap.sh). Each takes a
// value as the next argument; --flag=value is not understood (the script takes
// it for a positional argument).
var bootstrapShOptions = []string{
	"--apiserver-endpoint", "--aws-api-retry-attempts", "--b64-cluster-ca", "--cluster-id", "--container-runtime",
	"--containerd-config-file", "--dns-cluster-ip", "--docker-config-json", "--enable-docker-bridge",
	"--enable-local-outpost", "--ip-family", "--kubelet-extra-args", "--local-disks", "--mount-bpf-fs",
	"--pause-container-account", "--pause-container-version", "--service-ipv6-cidr", "--use-max-pods",
}

// BootstrapShArgs checks /etc/eks/bootstrap.sh arguments against the script's
// documented options and returns the cluster name and the options given.
func BootstrapShArgs(args []string) (string, map[string]string, error) {
	opts := map[string]string{}
	var positional []string
	for i := 0; i < len(args); i++ {
		a := args[i]
		switch {
		case slices.Contains(bootstrapShOptions, a):
			if i+1 >= len(args) {
				return "", nil, fmt.Errorf("bootstrap.sh %s needs a value", a)
			}
			opts[a] = args[i+1]
			i++
		case strings.HasPrefix(a, "-"):
			return "", nil, fmt.Errorf("bootstrap.sh has no option %q (its options: %s; values follow a space, not =)", a, strings.Join(bootstrapShOptions, " "))
		default:
			positional = append(positional, a)
		}
	}
	if len(positional) != 1 || positional[0] == "" {
		return "", nil, fmt.Errorf("bootstrap.sh takes one cluster name, got %q", positional)
	}
	if (opts["--apiserver-endpoint"] == "") != (opts["--b64-cluster-ca"] == "") {
		return "", nil, errors.New("bootstrap.sh needs --apiserver-endpoint and --b64-cluster-ca together (alone, either makes it call eks:DescribeCluster)")
	}
	if v, ok := opts["--use-max-pods"]; ok && v != "true" && v != "false" {
		return "", nil, fmt.Errorf("bootstrap.sh --use-max-pods %q: want true or false", v)
	}
	return positional[0], opts, nil
}

// joinFromCalls reads the join a script made: kubeadm join with the kubelet
// flags its drop-ins set, or /etc/eks/bootstrap.sh with its --kubelet-extra-args.
func joinFromCalls(calls []Call, upper string, m *awssim.IMDS) (*Join, error) {
	c := &imdsClient{h: m}
	id, zone, host, err := identityFromIMDS(c)
	if err != nil {
		return nil, err
	}
	for _, call := range calls {
		switch {
		case call.Name == "kubeadm" && len(call.Args) > 0 && call.Args[0] == "join":
			return kubeadmJoin(call.Args[1:], upper, host)
		case call.Name == "/etc/eks/bootstrap.sh":
			_, opts, err := BootstrapShArgs(call.Args)
			if err != nil {
				return nil, err
			}
			k, err := parseKubeletFlags(strings.Fields(opts["--kubelet-extra-args"]))
			if err != nil {
				return nil, fmt.Errorf("bootstrap.sh --kubelet-extra-args: %w", err)
			}
			j := &Join{Agent: "bootstrap.sh", NodeName: or(k.hostnameOverride, host), ProviderID: "aws:///" + zone + "/" + id,
				Labels: k.labels, Taints: k.taints, Endpoint: opts["--apiserver-endpoint"], CABundle: opts["--b64-cluster-ca"], MaxPods: k.maxPods}
			if k.providerID != "" {
				j.ProviderID = k.providerID
			}
			return j, nil
		}
	}
	return nil, nil
}

// kubeadmJoin reads `kubeadm join` arguments. kubeadm refuses a token that is not
// [a-z0-9]{6}.[a-z0-9]{16} and a discovery without a CA hash (or the unsafe
// skip); the node is named --node-name, else the host name. The kubelet flags
// come from the systemd drop-ins the script wrote (KUBELET_EXTRA_ARGS).
func kubeadmJoin(args []string, upper, host string) (*Join, error) {
	opts := map[string]string{}
	var endpoint string
	for i := 0; i < len(args); i++ {
		a := args[i]
		if !strings.HasPrefix(a, "-") {
			endpoint = a
			continue
		}
		name, value, ok := strings.Cut(a, "=")
		if !ok {
			if name == "--discovery-token-unsafe-skip-ca-verification" {
				opts[name] = "true"
				continue
			}
			if i+1 < len(args) {
				value = args[i+1]
				i++
			}
		}
		opts[name] = value
	}
	token := or(opts["--token"], opts["--discovery-token"])
	switch {
	case endpoint == "" && opts["--config"] == "":
		return nil, errors.New("kubeadm join has no API server endpoint")
	case !kubeadmTokenFormat(token):
		return nil, fmt.Errorf("kubeadm join: the bootstrap token %q is not of the form [a-z0-9]{6}.[a-z0-9]{16}", redactToken(token))
	case opts["--discovery-token-ca-cert-hash"] == "" && opts["--discovery-token-unsafe-skip-ca-verification"] == "":
		return nil, errors.New("kubeadm join: no --discovery-token-ca-cert-hash (nor --discovery-token-unsafe-skip-ca-verification)")
	}
	k, err := kubeletDropIns(upper)
	if err != nil {
		return nil, err
	}
	name := or(opts["--node-name"], or(k.hostnameOverride, host))
	return &Join{Agent: "kubeadm", NodeName: name, ProviderID: k.providerID, Labels: k.labels, Taints: k.taints,
		Endpoint: endpoint, MaxPods: k.maxPods}, nil
}

func kubeadmTokenFormat(t string) bool {
	id, secret, ok := strings.Cut(t, ".")
	valid := func(s string, n int) bool {
		if len(s) != n {
			return false
		}
		for _, c := range s {
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9') {
				return false
			}
		}
		return true
	}
	return ok && valid(id, 6) && valid(secret, 16)
}

// redactToken shows a token's ID half only.
func redactToken(t string) string {
	if id, _, ok := strings.Cut(t, "."); ok {
		return id + ".<redacted>"
	}
	if t == "" {
		return ""
	}
	return "<redacted>"
}

// kubeletDropIns reads KUBELET_EXTRA_ARGS from what the script wrote for the
// kubelet: systemd drop-ins (Environment="KUBELET_EXTRA_ARGS=...") and the
// environment files kubeadm's unit reads (/etc/default/kubelet,
// /etc/sysconfig/kubelet).
func kubeletDropIns(upper string) (kubeletArgs, error) {
	var texts []string
	dropIns, _ := filepath.Glob(filepath.Join(upper, "etc/systemd/system/kubelet.service.d/*.conf"))
	slices.Sort(dropIns)
	for _, f := range append(dropIns, filepath.Join(upper, "etc/default/kubelet"), filepath.Join(upper, "etc/sysconfig/kubelet")) {
		raw, err := os.ReadFile(f)
		if err != nil {
			continue
		}
		texts = append(texts, string(raw))
	}
	var args []string
	for _, t := range texts {
		for _, line := range strings.Split(t, "\n") {
			line = strings.TrimSpace(line)
			line = strings.TrimPrefix(line, "Environment=")
			line = strings.Trim(line, `"'`)
			if v, ok := strings.CutPrefix(line, "KUBELET_EXTRA_ARGS="); ok {
				args = strings.Fields(strings.Trim(v, `"'`))
			}
		}
	}
	return parseKubeletFlags(args)
}

func tail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, " | ")
}

// secretFile is where the AWS CLI stand-in finds a stored value: its name with
// slashes escaped.
func secretFile(dir, name string) string {
	return filepath.Join(dir, "store", strings.ReplaceAll(name, "/", "%2F"))
}
