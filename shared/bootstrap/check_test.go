package bootstrap

import (
	"strings"
	"testing"
)

func TestIMDSv1Reads(t *testing.T) {
	f := loadFixture(t, "seed002-cpu.yaml")
	reads := IMDSv1Reads(*f.class.Spec.UserData)
	if len(reads) != 2 || reads[0].Where != "line 3" || !strings.Contains(reads[0].Line, "meta-data/instance-id") || reads[1].Where != "line 4" {
		t.Errorf("seed 002 reads: %+v", reads)
	}
	for name, ud := range map[string]string{
		"token":        "#!/bin/bash\nTOKEN=$(curl -sX PUT http://169.254.169.254/latest/api/token -H 'X-aws-ec2-metadata-token-ttl-seconds: 300')\ncurl -H \"X-aws-ec2-metadata-token: $TOKEN\" http://169.254.169.254/latest/meta-data/instance-id",
		"no IMDS":      "#!/bin/bash\necho hi",
		"comment":      "#!/bin/bash\n# curl http://169.254.169.254/latest/meta-data/instance-id works only with IMDSv1\necho hi",
		"bottlerocket": "[settings.kubernetes]\napi-server = 'https://k'\n",
	} {
		if r := IMDSv1Reads(ud); len(r) != 0 {
			t.Errorf("%s: flagged %+v", name, r)
		}
	}
	// The address in a variable: its uses read, the assignment does not.
	viaVar := "#!/bin/bash\nIMDS=http://169.254.169.254/latest/meta-data\necho start\nID=$(curl -s \"$IMDS/instance-id\")\nZONE=$(wget -qO- ${IMDS}/placement/availability-zone)\n"
	if r := IMDSv1Reads(viaVar); len(r) != 2 || r[0].Where != "line 4" || r[1].Where != "line 5" {
		t.Errorf("variable: %+v", r)
	}
	// Backslash continuations are one read, numbered by their first line; IPv6 too.
	cont := "#!/bin/bash\ncurl -s \\\n  http://[fd00:ec2::254]/latest/meta-data/instance-id\n"
	if r := IMDSv1Reads(cont); len(r) != 1 || r[0].Where != "line 2" {
		t.Errorf("continuation: %+v", r)
	}
	// In MIME, only shell parts count, each numbered within its part.
	mime, err := WriteMIME([]Part{
		newPart(ContentTypeNodeConfig, "# http://169.254.169.254 in a comment of YAML\napiVersion: node.eks.aws/v1alpha1\n"),
		newPart(ContentTypeShell, "#!/bin/bash\ncurl -s http://169.254.169.254/latest/meta-data/local-ipv4\n"),
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := IMDSv1Reads(mime); len(r) != 1 || r[0].Where != "part 2, line 2" {
		t.Errorf("MIME: %+v", r)
	}
}

func TestLiteralSecrets(t *testing.T) {
	for ud, kind := range map[string]string{
		"kubeadm join k:6443 --token abcdef.0123456789abcdef":       "kubeadm bootstrap token",
		"kubeadm join k:6443 --token=s3cr3t":                        "kubeadm bootstrap token",
		"export AWS_ACCESS_KEY_ID=AKIAABCDEFGHIJKLMNOP":             "AWS access key",
		"aws_secret_access_key = " + strings.Repeat("aB3/", 10):     "AWS secret access key",
		"cat > key.pem <<EOF\n-----BEGIN RSA PRIVATE KEY-----\nMII": "private key",
	} {
		got := LiteralSecrets(ud)
		if len(got) != 1 || got[0].Kind != kind {
			t.Errorf("%q: %+v, want one %s", ud, got, kind)
			continue
		}
		for _, secret := range []string{"abcdef.0123456789abcdef", "s3cr3t", "AKIAABCDEFGHIJKLMNOP", "aB3/aB3/"} {
			if strings.Contains(got[0].Line, secret) {
				t.Errorf("%q: the finding repeats the secret: %s", ud, got[0].Line)
			}
		}
	}
	for _, ud := range []string{
		"kubeadm join k:6443 --token {{ .BootstrapToken }}",
		"kubeadm join k:6443 --token \"${JOINER_BOOTSTRAP_TOKEN}\"",
		"kubeadm join k:6443 --token $TOKEN",
		"kubeadm join https://<KUBE_APISERVER_DNS_NAME>:6443 --token <KUBEADM_BOOTSTRAP_TOKEN>",
		"--discovery-token-ca-cert-hash sha256:" + strings.Repeat("0123456789abcdef", 4),
	} {
		if got := LiteralSecrets(ud); len(got) != 0 {
			t.Errorf("%q flagged: %+v", ud, got)
		}
	}
}
