// Command crffd is the crffd daemon and command-line tool: it runs the site
// and coordinator roles of a federation, fits a single site, checks kernel
// plugins, and reproduces the paper's benchmarks. Run `crffd help` for the
// commands.
package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/crffd/crffd/plugins/host"
)

// forcedExitAfter is how long a command may take to wind down after SIGINT
// or SIGTERM before crffd kills its plugins and exits anyway.
const forcedExitAfter = 10 * time.Second

func main() {
	os.Exit(run())
}

func run() int {
	ctx, cancel := context.WithCancelCause(context.Background())
	defer cancel(nil)
	signals := make(chan os.Signal, 2)
	signal.Notify(signals, os.Interrupt, syscall.SIGTERM)
	go func() {
		sig := <-signals
		cancel(fmt.Errorf("received %v", sig))
		select {
		case <-signals:
		case <-time.After(forcedExitAfter):
		}
		host.CleanupAll()
		os.Exit(exitCode(sig))
	}()
	// Plugins are killed however the command ends.
	defer host.CleanupAll()

	err := newRootCmd(os.Stdout, os.Stderr).ExecuteContext(ctx)
	if err == nil {
		return 0
	}
	if cause := context.Cause(ctx); cause != nil {
		// A signal ended the command; whatever error it returned follows from that.
		fmt.Fprintf(os.Stderr, "crffd: stopped: %v\n", cause)
		return 130
	}
	fmt.Fprintf(os.Stderr, "crffd: %v\n", err)
	var ec exitCoder
	if errors.As(err, &ec) {
		return ec.ExitCode()
	}
	return 1
}

func exitCode(sig os.Signal) int {
	if s, ok := sig.(syscall.Signal); ok {
		return 128 + int(s)
	}
	return 1
}

// exitCoder is an error that chooses the process exit status.
type exitCoder interface{ ExitCode() int }
