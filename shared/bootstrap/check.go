package bootstrap

import (
	"fmt"
	"regexp"
	"strings"
)

// Finding is one line of user data a check flags.
type Finding struct {
	// Where is "line N", or "part P, line N" in a MIME document.
	Where string
	// Line is the flagged line, trimmed and shortened.
	Line string
	// Kind says what was found (for secrets: "kubeadm bootstrap token", ...).
	Kind string
}

// String renders "line 3 (curl -s http://...)".
func (f Finding) String() string { return fmt.Sprintf("%s (%s)", f.Where, f.Line) }

// imdsAddress matches the instance metadata service's IPv4 and IPv6 addresses.
var imdsAddress = regexp.MustCompile(`169\.254\.169\.254|\[fd00:ec2::254\]`)

// IMDSv1Reads returns the metadata reads in user data's shell scripts (the
// whole text when it is not MIME; its text/x-shellscript and cloud-boothook
// parts when it is) made by scripts that never send the IMDSv2 session token
// header. With metadataOptions.httpTokens: required, EC2 answers those reads 401
// with an empty body. A script that fetches a token and sends it is trusted
// with all its reads: executing the user data (package nodeboot) is what proves
// a script right.
func IMDSv1Reads(userData string) []Finding {
	var out []Finding
	forEachScript(userData, func(where string, script string) {
		if strings.Contains(strings.ToLower(script), strings.ToLower(imdsTokenHeader)) {
			return
		}
		vars := map[string]bool{}
		forEachLogicalLine(script, func(n int, line string) {
			code := stripComment(line)
			read := imdsAddress.MatchString(code)
			if m := assignment.FindStringSubmatch(code); m != nil && read && !strings.ContainsAny(code, "`(") {
				// IMDS=http://169.254.169.254 only names the address; its uses read.
				vars[m[1]] = true
				return
			}
			for v := range vars {
				if strings.Contains(code, "$"+v) || strings.Contains(code, "${"+v+"}") {
					read = true
				}
			}
			if read && !strings.Contains(code, "/latest/api/token") {
				out = append(out, Finding{Where: where + fmt.Sprintf("line %d", n), Line: clipLine(line), Kind: "metadata read without a token"})
			}
		})
	})
	return out
}

const imdsTokenHeader = "X-aws-ec2-metadata-token"

// UsesIMDSv1 reports whether user data reads the instance metadata service
// without an IMDSv2 session token (see IMDSv1Reads).
func UsesIMDSv1(userData string) bool { return len(IMDSv1Reads(userData)) > 0 }

var assignment = regexp.MustCompile(`^\s*(?:export\s+|local\s+|readonly\s+)?([A-Za-z_][A-Za-z0-9_]*)=`)

// secretPatterns are credentials that must not be written into user data, which
// anyone allowed ec2:DescribeLaunchTemplateVersions or
// ec2:DescribeInstanceAttribute can read, and the instance's every process too.
var secretPatterns = []struct {
	kind string
	re   *regexp.Regexp
}{
	{"kubeadm bootstrap token", regexp.MustCompile(`(^|[^A-Za-z0-9])[a-z0-9]{6}\.[a-z0-9]{16}($|[^A-Za-z0-9])`)},
	// --token followed by a literal: not a $variable, a {{ .Placeholder }} or a <PLACEHOLDER>.
	{"kubeadm bootstrap token", regexp.MustCompile(`--token[= ]+["']?[^\s"'$<{\\]`)},
	{"AWS access key", regexp.MustCompile(`(^|[^A-Z0-9])(AKIA|ASIA)[A-Z0-9]{16}($|[^A-Z0-9])`)},
	{"AWS secret access key", regexp.MustCompile(`(?i)aws_secret_access_key\s*[=:]\s*["']?[A-Za-z0-9/+]{40}`)},
	{"private key", regexp.MustCompile(`-----BEGIN [A-Z ]*PRIVATE KEY-----`)},
}

// LiteralSecrets returns the lines of user data that hold a credential in
// plain text, one finding per line.
func LiteralSecrets(userData string) []Finding {
	var out []Finding
	forEachLogicalLine(userData, func(n int, line string) {
		for _, p := range secretPatterns {
			if p.re.MatchString(line) {
				out = append(out, Finding{Where: fmt.Sprintf("line %d", n), Line: redact(line), Kind: p.kind})
				return
			}
		}
	})
	return out
}

// redact shows where a line is without repeating the secret it holds.
func redact(line string) string {
	for _, p := range secretPatterns {
		line = p.re.ReplaceAllString(line, " <redacted> ")
	}
	return clipLine(line)
}

// forEachScript calls fn with each shell script of user data: the whole text,
// or each shell part of a MIME document ("part N, " in where).
func forEachScript(userData string, fn func(where, script string)) {
	if !IsMIME(userData) {
		fn("", userData)
		return
	}
	parts, err := ParseMIME(userData)
	if err != nil {
		fn("", userData)
		return
	}
	for i, p := range parts {
		switch p.ContentType() {
		case "text/x-shellscript", "text/cloud-boothook", "text/x-shellscript-per-boot", "text/x-shellscript-per-instance", "text/x-shellscript-per-once":
			fn(fmt.Sprintf("part %d, ", i+1), p.Body)
		}
	}
}

// forEachLogicalLine calls fn with each line, backslash continuations joined,
// numbered from 1 by its first physical line.
func forEachLogicalLine(text string, fn func(n int, line string)) {
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		start, line := i+1, lines[i]
		for strings.HasSuffix(line, "\\") && i+1 < len(lines) {
			i++
			line = strings.TrimSuffix(line, "\\") + " " + strings.TrimSpace(lines[i])
		}
		fn(start, line)
	}
}

func stripComment(line string) string {
	if t := strings.TrimSpace(line); strings.HasPrefix(t, "#") {
		return ""
	}
	return line
}

func clipLine(s string) string {
	s = strings.Join(strings.Fields(s), " ")
	if len(s) > 100 {
		return s[:100] + "…"
	}
	return s
}
