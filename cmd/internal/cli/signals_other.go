//go:build !linux

package cli

import "os/exec"

// dieWithParent needs Linux's parent-death signal; elsewhere only the signals
// `joiner` receives are passed on.
func dieWithParent(*exec.Cmd) {}
