// Command crff-kernel-laplacian is the built-in laplacian kernel plugin of crffd.
// crffd launches it; it is not meant to be run by hand.
package main

import (
	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/plugins/kernels/builtin"
)

func main() { kernels.Serve(builtin.Laplacian{}) }
