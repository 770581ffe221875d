package store_test

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/crffd/crffd/store"
)

const crashEnv = "CRFFD_STORE_CRASH_HELPER"

// crashRows is the size of a run in the crash test: large enough that a
// write takes a while, so that most kills land inside one.
const crashRows = 5000

// TestCrashHelper is not a test: run by TestCrashDuringWrite in a
// subprocess, it publishes run after run into the file named by
// $CRFFD_STORE_CRASH_HELPER until it is killed, saying "writing" before
// each write.
func TestCrashHelper(t *testing.T) {
	path := os.Getenv(crashEnv)
	if path == "" {
		t.Skip("helper process for TestCrashDuringWrite")
	}
	ctx := context.Background()
	s, err := store.Open(ctx, path, store.Options{})
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	recs, err := s.ReadRecords(ctx, bigSource(path))
	if err != nil {
		fmt.Println("error:", err)
		os.Exit(2)
	}
	for k := 1; ; k++ {
		fmt.Println("writing")
		if err := publish(ctx, s, recs.Layout, fmt.Sprintf("run-%d-%d", os.Getpid(), k), recs.IDs, float64(k)); err != nil {
			fmt.Println("error:", err)
			os.Exit(2)
		}
	}
}

// TestCrashDuringWrite kills a process with SIGKILL while it writes
// results, several times, and checks each time that the file passes
// PRAGMA integrity_check and holds exactly one complete run, and that the
// user's table is untouched.
func TestCrashDuringWrite(t *testing.T) {
	ctx := context.Background()
	path, ids := newBigSite(t, crashRows)
	s := openSite(t, path)
	recs, err := s.ReadRecords(ctx, bigSource(path))
	if err != nil {
		t.Fatal(err)
	}
	if err := publish(ctx, s, recs.Layout, "run-0", ids, 0); err != nil {
		t.Fatal(err)
	}
	s.Close()
	before := tableDigest(t, path, "t")

	rng := rand.New(rand.NewPCG(uint64(time.Now().UnixNano()), 1))
	lastRun := "run-0"
	changed := 0
	const kills = 5
	for i := range kills {
		cmd := exec.Command(os.Args[0], "-test.run=^TestCrashHelper$", "-test.count=1")
		cmd.Env = append(os.Environ(), crashEnv+"="+path)
		out, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lines := bufio.NewScanner(out)
		// Let it publish a few runs, then kill it at a random moment of
		// a later write.
		writes := 1 + rng.IntN(3)
		for w := 0; w < writes && lines.Scan(); w++ {
			if l := lines.Text(); strings.HasPrefix(l, "error:") {
				t.Fatalf("helper: %s", l)
			}
		}
		time.Sleep(time.Duration(rng.IntN(40_000)) * time.Microsecond)
		if err := cmd.Process.Kill(); err != nil { // SIGKILL on Unix
			t.Fatal(err)
		}
		_ = cmd.Wait()

		db := rawDB(t, path)
		var check string
		if err := db.QueryRow(`PRAGMA integrity_check`).Scan(&check); err != nil || check != "ok" {
			t.Fatalf("kill %d: integrity_check = %q, %v", i, check, err)
		}
		if err := checkOneRun(db, crashRows); err != nil {
			t.Fatalf("kill %d: %v", i, err)
		}
		var run string
		if err := db.QueryRow(`SELECT run FROM crff_run WHERE state = 'current'`).Scan(&run); err != nil {
			t.Fatal(err)
		}
		var cateRun string
		if err := db.QueryRow(`SELECT DISTINCT run FROM crff_cate`).Scan(&cateRun); err != nil || cateRun != run {
			t.Fatalf("kill %d: current run %q, crff_cate of %q (%v)", i, run, cateRun, err)
		}
		if run != lastRun {
			changed++
		}
		lastRun = run
		db.Close()
	}
	if after := tableDigest(t, path, "t"); after != before {
		t.Error("the user's table changed")
	}
	s = openSite(t, path)
	cates, err := s.ReadCATE(ctx)
	if err != nil || len(cates) != crashRows {
		t.Errorf("after the crashes: %d CATEs, %v", len(cates), err)
	}
	t.Logf("%d kills; the current run had advanced at %d of them", kills, changed)
}
