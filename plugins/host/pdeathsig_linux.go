package host

import (
	"os/exec"
	"syscall"
)

// DieWithParent asks the kernel to SIGKILL the plugin when the host dies, so
// that even a host killed with SIGKILL leaves no plugin behind.
func DieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
