// Package host finds, checks and launches crffd plugin executables.
//
// A plugin is an executable named crff-<kind>-<name> (for example
// crff-kernel-gaussian) in a plugin directory, which defaults to the folder
// of the running crffd executable. Launch starts it as a subprocess under
// hashicorp/go-plugin over gRPC with AutoMTLS. When the host pins a plugin's
// SHA-256, a binary with any other hash is refused before it runs.
//
// No plugin outlives its host: every client is managed, so
// go-plugin's CleanupClients kills them all on a clean exit or a signal, and
// on Linux each plugin also receives SIGKILL from the kernel when the host
// dies without cleaning up (PR_SET_PDEATHSIG).
package host
