//go:build !linux

package host

import "os/exec"

// DieWithParent does nothing where the kernel offers no parent-death signal;
// CleanupAll still kills plugins on a clean exit or a handled signal.
func DieWithParent(*exec.Cmd) {}
