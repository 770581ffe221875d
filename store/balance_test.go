package store_test

import (
	"context"
	"errors"
	"fmt"
	"math"
	"testing"
	"time"

	"github.com/crffd/crffd/balance"
	"github.com/crffd/crffd/store"
)

// checkedBalance returns the balance of the 12 rows of testdata/records.sql
// (age, smoker, bmi), weighted by their logistic propensity.
func checkedBalance(t *testing.T, s *store.Site, path string) balance.Report {
	t.Helper()
	recs, err := s.ReadRecords(context.Background(), store.Source{DB: path, Table: "records", IDColumn: "patient_id",
		TreatmentColumn: "treated", OutcomeColumn: "outcome", Covariates: []string{"age", "smoker", "bmi"}})
	if err != nil {
		t.Fatal(err)
	}
	sums, err := balance.Of(context.Background(), recs.Data.X, recs.Data.W)
	if err != nil {
		t.Fatal(err)
	}
	r, err := balance.Summarise(sums, recs.Layout.Covariates, recs.Layout.Binary, "treated")
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestBalanceRoundTrip(t *testing.T) {
	ctx := context.Background()
	path := newRecordsFile(t, `UPDATE records SET bmi = NULL WHERE patient_id IN (3, 4)`)
	s := openSite(t, path)
	if _, err := s.ReadBalance(ctx, store.ScopeLocal); !errors.Is(err, store.ErrNoBalance) {
		t.Fatalf("before any check: %v, want ErrNoBalance", err)
	}
	l := store.Layout{Table: "records", Covariates: []string{"age", "smoker", "bmi"}}
	missing, rows, err := s.CountMissing(ctx, l)
	if err != nil {
		t.Fatal(err)
	}
	if rows != 12 || missing[0] != 0 || missing[1] != 0 || missing[2] != 2 {
		t.Fatalf("CountMissing: %v of %d rows, want [0 0 2] of 12", missing, rows)
	}
	execSQL(t, path, `UPDATE records SET bmi = 25 WHERE bmi IS NULL`)
	r := checkedBalance(t, s, path)
	at := time.Date(2026, 11, 25, 10, 0, 0, 0, time.UTC)
	local := store.Balance{Scope: store.ScopeLocal, At: at, Sites: 1, LeftOut: 0, Missing: missing, Report: r}
	if err := s.WriteBalance(ctx, local); err != nil {
		t.Fatal(err)
	}
	global := store.Balance{Scope: store.ScopeGlobal, At: at, Run: "run-1", Sites: 3, LeftOut: -1, Report: r}
	if err := s.WriteBalance(ctx, global); err != nil {
		t.Fatal(err)
	}
	// Writing again replaces the scope's rows.
	if err := s.WriteBalance(ctx, local); err != nil {
		t.Fatal(err)
	}
	for _, want := range []store.Balance{local, global} {
		got, err := s.ReadBalance(ctx, want.Scope)
		if err != nil {
			t.Fatal(err)
		}
		// Every stored value comes back: %#v prints NaN SMDs alike.
		if !got.At.Equal(at) {
			t.Errorf("%s: read the time %v, wrote %v", want.Scope, got.At, at)
		}
		got.At = want.At
		if g, w := fmt.Sprintf("%#v", got), fmt.Sprintf("%#v", want); g != w {
			t.Errorf("%s: read\n%s\nwrote\n%s", want.Scope, g, w)
		}
	}

	// The view ranks the covariates by |SMD| and flags them at balance.Threshold.
	rs, err := rawDB(t, path).Query(`SELECT scope, rank, covariate, smd, smd_weighted, imbalanced, imbalanced_weighted, treated, verdict FROM crff_balance`)
	if err != nil {
		t.Fatal(err)
	}
	defer rs.Close()
	ranked := r.Ranked()
	n := 0
	for rs.Next() {
		var scope, cov, verdict string
		var rank, imb, imbW, treated int
		var smd, smdW float64
		if err := rs.Scan(&scope, &rank, &cov, &smd, &smdW, &imb, &imbW, &treated, &verdict); err != nil {
			t.Fatal(err)
		}
		wantScope := "global"
		if n < 3 {
			wantScope = "local"
		}
		if scope != wantScope || rank != n%3+1 || cov != ranked[n%3].Name || treated != 6 || verdict != string(r.Verdict) {
			t.Errorf("view row %d: %s %d %s (%d treated, %s)", n, scope, rank, cov, treated, verdict)
		}
		if (imb == 1) != (math.Abs(smd) > balance.Threshold) || (imbW == 1) != (math.Abs(smdW) > balance.Threshold) {
			t.Errorf("view row %d: %s smd %.3f (imbalanced %d), weighted %.3f (%d): not balance.Threshold's", n, cov, smd, imb, smdW, imbW)
		}
		n++
	}
	if n != 6 {
		t.Errorf("crff_balance has %d rows, want 6", n)
	}
}

func TestWriteBalanceErrors(t *testing.T) {
	ctx := context.Background()
	s := openSite(t, newRecordsFile(t))
	r := balance.Report{Covariates: []balance.Covariate{{Name: "a"}}, Verdict: balance.Good, Advice: "fine"}
	for _, tc := range []struct {
		name string
		b    store.Balance
	}{
		{"scope", store.Balance{Scope: "both", Report: r}},
		{"missing counts", store.Balance{Scope: store.ScopeLocal, Missing: []int{1, 2}, Report: r}},
	} {
		if err := s.WriteBalance(ctx, tc.b); !errors.Is(err, store.ErrBadResult) {
			t.Errorf("%s: %v, want ErrBadResult", tc.name, err)
		}
	}
	if _, _, err := s.CountMissing(ctx, store.Layout{Table: "records", Covariates: []string{"nope"}}); !errors.Is(err, store.ErrMissingColumn) {
		t.Errorf("CountMissing of a missing column: %v, want ErrMissingColumn", err)
	}
}
