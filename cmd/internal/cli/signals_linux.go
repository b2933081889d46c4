package cli

import (
	"os/exec"
	"syscall"
)

// dieWithParent has the kernel send RunProgram SIGTERM when `joiner` dies without
// passing a signal on (SIGKILL, a crash), so it is never left running with parent 1.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
