// Package demo runs a whole federation on simulated data, as crffd demo
// does: three sites of the paper's synthetic design, the last dissimilar
// (Δ = 4), written by package sandbox with a CA and certificates; a
// coordinator and three site daemons started as separate processes of
// crffd itself, talking grpc over mutual TLS on loopback; and a report of
// the local and global ATEs against the simulated truth, the model
// selection and the learned transfer factors.
//
// Run stops every process it started, and removes the folder it made
// unless asked to keep it. A demo that fails keeps its folder, with the
// daemons' logs.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"time"

	"github.com/crffd/crffd/plugins/host"
	"github.com/crffd/crffd/sandbox"
	"github.com/crffd/crffd/synth"
)

// Deltas are the shifts Δ of the demo's sites, of the paper's synthetic
// design: the last one dissimilar, so that learned transfer has a site to
// protect.
var Deltas = []float64{0, 0, 4}

// Config configures a demo.
type Config struct {
	// Dir is the folder to write into, which must be new or empty; ""
	// makes a fresh one under the system's temporary folder.
	Dir  string
	Rows int    // rows per site
	Seed uint64 // seed of the simulated data
	// Keep keeps the folder made for an empty Dir; a Dir given is always
	// kept.
	Keep bool
	// Executable is crffd, started as "crffd ROLE --plugin-dir PluginDir
	// --config FILE --once" for each daemon.
	Executable, PluginDir string
}

// Run runs the demo and writes its report to w.
func Run(ctx context.Context, cfg Config, w io.Writer) error {
	start := time.Now()
	dir, keep, err := folder(cfg.Dir, cfg.Keep)
	if err != nil {
		return err
	}
	names := []string{"site1", "site2", "site3"}
	fmt.Fprintf(w, "crffd demo: %d simulated sites of %d rows (site3 dissimilar: Δ = 4) in %s\n", len(names), cfg.Rows, dir)
	design := synth.Design{Sources: len(names), Rows: cfg.Rows, Delta: Deltas, Seed: cfg.Seed}
	tables, err := synth.Generate(design)
	if err != nil {
		return err
	}
	if _, err := sandbox.WriteSites(ctx, dir, tables, false, nil, design.Bounds()); err != nil {
		return err
	}
	if _, err := sandbox.WriteFederation(dir, len(names)); err != nil {
		return err
	}
	logDir := filepath.Join(dir, "logs")
	if err := os.MkdirAll(logDir, 0o755); err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	fmt.Fprintln(w, "training: a coordinator and 3 site daemons, grpc over mutual TLS on loopback, Gaussian kernel plugin")
	fmt.Fprintf(w, "  (their logs: %s)\n", logDir)
	peaks := &peaks{}
	if err := cfg.train(ctx, dir, logDir, names, peaks); err != nil {
		return err
	}
	fmt.Fprintf(w, "done in %.1f s\n", time.Since(start).Seconds())
	peaks.print(w, append([]string{"coordinator"}, names...))
	fmt.Fprintln(w)
	if err := printResults(ctx, w, dir, names); err != nil {
		return err
	}
	if keep {
		return printQueries(w, dir)
	}
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("demo: remove %s: %w", dir, err)
	}
	_, err = fmt.Fprintf(w, "\nremoved %s; crffd demo --keep keeps the SQLite files, logs and certificates to look at\n", dir)
	return err
}

// folder returns the demo's folder for dir, made when needed, and whether
// to keep it.
func folder(dir string, keep bool) (string, bool, error) {
	var err error
	keep = keep || dir != ""
	if dir == "" {
		if dir, err = os.MkdirTemp("", "crffd-demo-"); err != nil {
			return "", false, fmt.Errorf("demo: %w", err)
		}
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return "", false, fmt.Errorf("demo: %s is not empty; give a new or empty --dir", dir)
	} else if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", false, fmt.Errorf("demo: %w", err)
	}
	return dir, keep, nil
}

// train runs the coordinator and a daemon per site of names, configured in
// dir, until they end, with their logs in logDir. The coordinator listens
// on ports the kernel picks (port 0, set through the environment over its
// file), and the sites dial the address it logs: no port is chosen and
// released first, which another process could take in between.
func (cfg Config) train(ctx context.Context, dir, logDir string, names []string, peaks *peaks) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(names)+1)
	any0 := []string{"CRFFD_FEDERATION_ADDRESS=127.0.0.1:0", "CRFFD_FEDERATION_METRICS_ADDRESS=127.0.0.1:0"}
	if err := cfg.start(ctx, logDir, "coordinator", any0, errs, peaks, "coordinator", "--config", filepath.Join(dir, "coordinator.yaml"), "--once"); err != nil {
		return err
	}
	addr, err := listening(ctx, filepath.Join(logDir, "coordinator.log"), errs)
	if err != nil {
		return fmt.Errorf("demo: %w (see the logs in %s)", err, logDir)
	}
	for _, n := range names {
		env := []string{"CRFFD_FEDERATION_ADDRESS=" + addr}
		if err := cfg.start(ctx, logDir, n, env, errs, peaks, "site", "--config", filepath.Join(dir, n+".yaml"), "--once"); err != nil {
			return err
		}
	}
	var failed []error
	for range len(names) + 1 {
		if err := <-errs; err != nil {
			failed = append(failed, err)
			cancel() // one daemon failing dooms the run: stop the others now
		}
	}
	if len(failed) > 0 {
		return fmt.Errorf("demo: %w (see the logs in %s)", errors.Join(failed...), logDir)
	}
	return nil
}

// listeningLine matches the coordinator's log line that gives the address
// it bound.
var listeningLine = regexp.MustCompile(`msg="coordinator listening".* address=(\S+)`)

// listening returns the address the coordinator logging to log listens
// on, once it says so; it fails if the coordinator ends first (reported on
// errs, which it puts back) or within a minute.
func listening(ctx context.Context, log string, errs chan error) (string, error) {
	tick := time.NewTicker(20 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(time.Minute)
	for {
		if b, err := os.ReadFile(log); err == nil {
			if m := listeningLine.FindSubmatch(b); m != nil {
				return string(m[1]), nil
			}
		}
		select {
		case err := <-errs:
			errs <- err
			return "", fmt.Errorf("the coordinator ended before it listened: %v", err)
		case <-deadline:
			return "", errors.New("the coordinator did not say where it listens within a minute")
		case <-ctx.Done():
			return "", ctx.Err()
		case <-tick.C:
		}
	}
}

// start starts crffd ROLE ARGS as a child that dies with the demo, logging
// to logDir/NAME.log, with env added to its environment, and reports its end
// on errs and its peak resident set in peaks.
func (cfg Config) start(ctx context.Context, logDir, name string, env []string, errs chan<- error, peaks *peaks, role string, args ...string) error {
	logFile, err := os.Create(filepath.Join(logDir, name+".log"))
	if err != nil {
		return fmt.Errorf("demo: %w", err)
	}
	cmd := exec.CommandContext(ctx, cfg.Executable, append([]string{role, "--plugin-dir", cfg.PluginDir}, args...)...)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	cmd.Env = append(os.Environ(), env...)
	cmd.WaitDelay = 10 * time.Second
	host.DieWithParent(cmd)
	if err := cmd.Start(); err != nil {
		logFile.Close()
		return fmt.Errorf("demo: start %s: %w", name, err)
	}
	// The high-water mark is read while the daemon runs, every
	// peakEvery: what it grows by in its last moments is all it misses.
	stop := make(chan struct{})
	go func() {
		tick := time.NewTicker(peakEvery)
		defer tick.Stop()
		for {
			if b, ok := peakRSS(cmd.Process.Pid); ok {
				peaks.set(name, b)
			}
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	go func() {
		err := cmd.Wait()
		close(stop)
		logFile.Close()
		if err != nil {
			err = fmt.Errorf("%s: %w", name, err)
		}
		errs <- err
	}()
	return nil
}

// peakEvery is how often the daemons' peak resident sets are read.
const peakEvery = 200 * time.Millisecond

// peaks are the daemons' peak resident sets, in bytes, by name: what a
// site's operator sizes its machine by.
type peaks struct {
	mu sync.Mutex
	by map[string]int64
}

func (p *peaks) set(name string, b int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.by == nil {
		p.by = map[string]int64{}
	}
	p.by[name] = max(p.by[name], b)
}

// print writes the peaks of names that are known, on one line: nothing
// where the system does not say.
func (p *peaks) print(w io.Writer, names []string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	var parts []string
	for _, n := range names {
		if b, ok := p.by[n]; ok {
			parts = append(parts, fmt.Sprintf("%s %.2f GiB", n, float64(b)/(1<<30)))
		}
	}
	if len(parts) > 0 {
		fmt.Fprintf(w, "peak resident memory (each daemon, without its plugins): %s\n", strings.Join(parts, ", "))
	}
}
