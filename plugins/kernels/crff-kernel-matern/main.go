// Command crff-kernel-matern is the built-in matern kernel plugin of crffd.
// crffd launches it; it is not meant to be run by hand.
package main

import (
	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/plugins/kernels/builtin"
)

func main() { kernels.Serve(builtin.Matern{}) }
