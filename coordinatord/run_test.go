package coordinatord

import (
	"context"
	"errors"
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/federation/wire"
	"github.com/crffd/crffd/store/coordstore"
)

// silentConn is a connection over which no site ever answers; a closed
// inbox stands for a transport that failed.
type silentConn struct{ in chan *wire.Envelope }

func (silentConn) Send(context.Context, *wire.Envelope) error { return nil }
func (c silentConn) Inbox() <-chan *wire.Envelope             { return c.in }

// newConfig returns a daemon configuration of three sites over conn, with
// a state file in a test folder.
func newConfig(t *testing.T, conn federation.Conn) Config {
	t.Helper()
	db, err := coordstore.Open(context.Background(), filepath.Join(t.TempDir(), "coordinator.sqlite"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	n := 0
	return Config{
		Run: federation.CoordinatorConfig{Name: "coordinator", Sites: []string{"a", "b", "c"}, Config: estimator.DefaultConfig(),
			Spectral: estimator.GaussianSpectral{}, RoundTimeout: time.Millisecond, Retries: 0},
		State: db, Conn: conn,
		NewRunID: func() string { n++; return fmt.Sprintf("run-%d", n) },
	}
}

// TestSilentSitesFailTheRun: with Once, a run whose sites never answer is
// recorded as failed, and Run returns an error marked ErrRunFailed.
func TestSilentSitesFailTheRun(t *testing.T) {
	cfg := newConfig(t, silentConn{in: make(chan *wire.Envelope)})
	cfg.Once = true
	err := Run(context.Background(), cfg)
	if !errors.Is(err, ErrRunFailed) || errors.Is(err, ErrStorage) {
		t.Fatalf("Run: %v, want ErrRunFailed", err)
	}
	log, err := cfg.State.RunLog(context.Background())
	if err != nil || len(log) != 1 || log[0].Run != "run-1" || log[0].Status != federation.RunFailed {
		t.Errorf("run log %+v, %v; want one failed run-1", log, err)
	}
}

// TestClosedTransportStops: a closed transport stops the daemon at once,
// even without Once, and is not retried.
func TestClosedTransportStops(t *testing.T) {
	in := make(chan *wire.Envelope)
	close(in)
	cfg := newConfig(t, silentConn{in: in})
	done := make(chan error, 1)
	go func() { done <- Run(context.Background(), cfg) }()
	select {
	case err := <-done:
		if !errors.Is(err, federation.ErrTransportClosed) || errors.Is(err, ErrRunFailed) {
			t.Errorf("Run: %v, want ErrTransportClosed", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not stop for a closed transport")
	}
}

// TestRetriesUntilStopped: without Once, a failed run is followed by the
// next after RetryAfter, until ctx ends (here as the third run starts, so
// that Run returns that run's error).
func TestRetriesUntilStopped(t *testing.T) {
	cfg := newConfig(t, silentConn{in: make(chan *wire.Envelope)})
	cfg.RetryAfter = time.Millisecond
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ids := cfg.NewRunID
	cfg.NewRunID = func() string {
		id := ids()
		if id == "run-3" {
			cancel()
		}
		return id
	}
	if err := Run(ctx, cfg); err != nil && !errors.Is(err, context.Canceled) {
		t.Fatalf("Run: %v", err)
	}
	log, err := cfg.State.RunLog(context.Background())
	if err != nil || len(log) != 2 {
		t.Errorf("run log %+v, %v; want the failed runs before the stop", log, err)
	}
}

// TestRunRefusesABadConfig: min sites beyond the sites listed.
func TestRunRefusesABadConfig(t *testing.T) {
	cfg := newConfig(t, silentConn{in: make(chan *wire.Envelope)})
	cfg.MinSites = 4
	if err := Run(context.Background(), cfg); err == nil {
		t.Error("min sites 4 of 3: no error")
	}
}
