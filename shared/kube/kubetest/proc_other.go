//go:build !linux

package kubetest

import (
	"os"
	"syscall"
)

// terminate asks a child to stop.
var terminate os.Signal = os.Interrupt

// childAttr has no parent-death signal off Linux: Stop ends the children.
func childAttr() *syscall.SysProcAttr { return nil }
