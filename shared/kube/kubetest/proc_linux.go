package kubetest

import "syscall"

// terminate asks a child to stop.
var terminate = syscall.SIGTERM

// childAttr makes a child die with the test binary, so a test killed by its
// timeout leaves no scheduler or KWOK behind.
func childAttr() *syscall.SysProcAttr {
	return &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
