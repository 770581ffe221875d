package host

import (
	"os/exec"
	"syscall"
)

// dieWithParent asks the kernel to SIGKILL the plugin when the host dies, so
// that even a host killed with SIGKILL leaves no plugin behind.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
