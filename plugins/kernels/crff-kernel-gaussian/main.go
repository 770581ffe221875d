// Command crff-kernel-gaussian is the built-in gaussian kernel plugin of crffd.
// crffd launches it; it is not meant to be run by hand.
package main

import (
	"github.com/crffd/crffd/plugins/kernels"
	"github.com/crffd/crffd/plugins/kernels/builtin"
)

func main() { kernels.Serve(builtin.Gaussian{}) }
