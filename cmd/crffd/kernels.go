package main

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/crffd/crffd/internal/kernelcheck"
	"github.com/crffd/crffd/plugins/host"
	"github.com/crffd/crffd/plugins/kernels"
)

func newKernelsCmd(a *app) *cobra.Command {
	cmd := &cobra.Command{
		Use:   "kernels",
		Short: "List and self-test the kernel plugins",
	}
	cmd.AddCommand(newKernelsListCmd(a), newKernelsVerifyCmd(a))
	return cmd
}

func newKernelsListCmd(a *app) *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "Print the kernel plugins found in the plugin directory, with their Info",
		Example: `  crffd kernels list

  # the plugins of another folder (plugin_dir); the SHA256 column is ready to pin in plugin_sha256
  crffd kernels list --plugin-dir /opt/crffd/plugins`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			dir, err := a.pluginDir()
			if err != nil {
				return err
			}
			bins, err := kernelPlugins(dir)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NAME\tVERSION\tPARAMETERS\tDESCRIPTION\tPATH\tSHA256")
			for _, b := range bins {
				c, err := a.openKernel(cmd, dir, b.Name, nil)
				if err != nil {
					return err
				}
				in := c.Info()
				c.Close()
				sum, err := host.SHA256(b.Path)
				if err != nil {
					return err
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\n", in.Name, in.Version, kernels.DescribeParams(in.Params), in.Description, b.Path, sum)
			}
			return tw.Flush()
		},
	}
}

func (a *app) openKernel(cmd *cobra.Command, dir, name string, p kernels.Params) (*kernels.Client, error) {
	return a.openKernelCtx(cmd.Context(), dir, name, p)
}

func (a *app) openKernelCtx(ctx context.Context, dir, name string, p kernels.Params) (*kernels.Client, error) {
	return kernels.Open(ctx, kernels.Options{
		Dir: dir, Name: name, Pin: a.conf().Pin(kernels.Kind, name), Params: p, Logger: a.log,
	})
}

// errVerifyFailed reports a kernel whose features miss its exact values.
var errVerifyFailed = errors.New("kernel self-test failed")

func newKernelsVerifyCmd(a *app) *cobra.Command {
	o := kernelcheck.DefaultOptions
	cmd := &cobra.Command{
		Use:   "verify [NAME]",
		Short: "Check that each kernel's random features approximate its exact kernel",
		Long: `verify launches each kernel plugin (or only NAME), draws D frequencies, and
compares the random-feature estimate φ(a)ᵀφ(b) with the plugin's exact k(a, b)
on random pairs. It checks every parameter value a kernel lists for testing
(for example Matérn ν = 0.5, 1.5, 2.5), prints the figures, and exits non-zero
when any maximum error exceeds the tolerance. It is the self-test to run on a
new third-party kernel.`,
		Example: `  crffd kernels verify

  # one kernel, a new plugin say, with a tighter tolerance on more pairs
  crffd kernels verify matern --pairs 1000 --tolerance 0.02`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			dir, err := a.pluginDir()
			if err != nil {
				return err
			}
			var names []string
			if len(args) == 1 {
				names = args
			} else {
				bins, err := kernelPlugins(dir)
				if err != nil {
					return err
				}
				for _, b := range bins {
					names = append(names, b.Name)
				}
			}
			tw := tabwriter.NewWriter(a.stdout, 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "KERNEL\tPARAMS\tDIM\tD\tPAIRS\tK RANGE\tMEAN ABS ERR\tMAX ABS ERR\tTOLERANCE\tRESULT")
			var failed []string
			for _, name := range names {
				results, err := a.verifyKernel(cmd, dir, name, o)
				if err != nil {
					tw.Flush()
					return err
				}
				for _, r := range results {
					verdict := "ok"
					if !r.OK() {
						verdict = "FAIL"
						failed = append(failed, fmt.Sprintf("%s(%s)", r.Kernel, r.Params))
					}
					fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%d\t[%.3f, %.3f]\t%.4f\t%.4f\t%g\t%s\n",
						r.Kernel, r.Params, o.Dim, o.Features, o.Pairs, r.MinK, r.MaxK, r.MeanAbsErr, r.MaxAbsErr, o.Tolerance, verdict)
				}
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(failed) > 0 {
				return fmt.Errorf("%w: %s", errVerifyFailed, strings.Join(failed, ", "))
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.IntVar(&o.Dim, "dim", o.Dim, "input dimension of the test points")
	f.IntVar(&o.Features, "features", o.Features, "number of random frequencies D")
	f.IntVar(&o.Pairs, "pairs", o.Pairs, "number of random pairs")
	f.Float64Var(&o.Tolerance, "tolerance", o.Tolerance, "largest acceptable absolute error")
	f.Uint64Var(&o.Seed, "seed", o.Seed, "seed of the frequencies and the pairs")
	return cmd
}

// verifyKernel runs the self-test of kernel name (kernelcheck.Settings).
func (a *app) verifyKernel(cmd *cobra.Command, dir, name string, o kernelcheck.Options) ([]kernelcheck.Result, error) {
	c, err := a.openKernel(cmd, dir, name, nil)
	if err != nil {
		return nil, err
	}
	defer c.Close()
	return kernelcheck.Settings(cmd.Context(), c, o)
}

// kernelPlugins lists the kernel plugins in dir, and fails when there is none.
func kernelPlugins(dir string) ([]host.Binary, error) {
	bins, err := host.List(dir, kernels.Kind)
	if err == nil && len(bins) == 0 {
		err = fmt.Errorf("no kernel plugins (crff-kernel-*) in %q: %w", dir, host.ErrNotFound)
	}
	return bins, err
}
