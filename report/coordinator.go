package report

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"math"
	"net/url"
	"os"
	"strings"
	"time"

	_ "modernc.org/sqlite" // the database/sql driver "sqlite"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/federation"
	"github.com/crffd/crffd/sqlfiles"
	"github.com/crffd/crffd/store"
	"github.com/crffd/crffd/store/coordstore"
)

// coordinatorPage is what the coordinator template shows.
type coordinatorPage struct {
	Title     string
	File      string
	Generated string
	Runs      []runRow
	State     *stateInfo    // nil when no run is in progress
	Finished  *finishedInfo // the latest finished run's Λ; nil when none recorded it
}

type runRow struct {
	Run      string
	Finished string
	ATE      string
	SE       string
	Interval string
	PlugIn   string
	Rows     int
	Sites    string // the sites the run covered
}

type stateInfo struct {
	Run      string
	Step     uint64
	Saved    string
	Training string // the model in training, with its round
	Sites    []siteRow
	Models   []modelInfo
}

type siteRow struct {
	Name    string
	Rows    int
	Dropped int
}

type modelInfo struct {
	Name   string
	Rounds int
	Loss   string
	Lambda *Figure
}

// Coordinator writes the HTML report of the coordinator's state file at
// path to w: its finished runs with their global ATEs, the full matrix Λ of
// transfer factors of each model of the latest finished run that recorded
// them and, when a run is in progress, its sites and the matrices of the
// models trained so far. It opens the file read-only and never changes it.
func Coordinator(ctx context.Context, path string, w io.Writer) error {
	if _, err := os.Stat(path); err != nil {
		return fmt.Errorf("coordinator report: %w", err)
	}
	q := url.Values{}
	q.Set("mode", "ro")
	q.Add("_pragma", "busy_timeout(5000)")
	db, err := sql.Open("sqlite", sqlfiles.FileURI(path, q))
	if err != nil {
		return fmt.Errorf("coordinator report of %q: %w", path, err)
	}
	defer db.Close()
	pg := &coordinatorPage{Title: "crffd federation report", File: path, Generated: time.Now().UTC().Format(time.RFC3339)}
	if err := pg.read(ctx, db); err != nil {
		return fmt.Errorf("coordinator report of %q: %w", path, err)
	}
	if err := coordinatorTemplate.Execute(w, pg); err != nil {
		return fmt.Errorf("coordinator report of %q: write page: %w", path, err)
	}
	return nil
}

// finishedInfo is the transfer factors of the latest finished run.
type finishedInfo struct {
	Run    string
	Models []modelInfo
}

// lambdaFigure draws the matrix z of transfer factors among sites: row i,
// column j is λ_ij, how much site i's model borrows from site j's
// parameters. The axis labels say which way it reads, since "from" and
// "to" alone leave the reader to guess whether a row lends or borrows.
func lambdaFigure(model string, sites []string, z [][]float64) (*Figure, error) {
	if len(z) != len(sites) || len(sites) == 0 {
		return nil, nil
	}
	f, err := heatmap("λ of the "+model+" model: how much site i's model borrows from site j",
		"site j (whose parameters are borrowed)", "site i (the model that borrows)", sites, sites, z)
	if err != nil {
		return nil, err
	}
	return &f, nil
}

// read fills the page from the state file.
func (pg *coordinatorPage) read(ctx context.Context, db *sql.DB) error {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema
		WHERE type = 'table' AND name IN ('crff_coordinator_state', 'crff_coordinator_runs')`).Scan(&n)
	if err != nil {
		return err
	}
	if n != 2 {
		return errors.New("not a coordinator state file (no crff_coordinator_state and crff_coordinator_runs tables)")
	}
	runs, err := coordstore.ReadRuns(ctx, db)
	if err != nil {
		return err
	}
	for _, fr := range runs {
		r := runRow{Run: fr.Run, Finished: fr.Finished, Rows: fr.Rows, PlugIn: fmt.Sprintf("%.4f", fr.PlugIn), Sites: strings.Join(fr.Sites, ", ")}
		if fr.Sites == nil {
			r.Sites = "all" // recorded before coordinator.min_sites
		}
		fa := newATERow(store.ATE{Scope: store.ScopeGlobal, Estimator: store.EstimatorAIPW, ATE: fr.AIPW.Estimate,
			SE: fr.AIPW.SE, Lower: fr.AIPW.Lower, Upper: fr.AIPW.Upper, N: fr.Rows, Clipped: -1})
		r.ATE, r.SE, r.Interval = fa.ATE, fa.SE, fa.Interval
		if math.IsNaN(fr.AIPW.Estimate) {
			r.ATE = "none" // recorded before the AIPW estimate
		}
		pg.Runs = append(pg.Runs, r)
		if pg.Finished == nil && fr.Lambda != nil && fr.Sites != nil {
			fi := &finishedInfo{Run: fr.Run}
			for _, k := range estimator.Kinds {
				z, ok := fr.Lambda[k.String()]
				if !ok {
					continue
				}
				f, err := lambdaFigure(k.String(), fr.Sites, z)
				if err != nil {
					return err
				}
				if f != nil {
					fi.Models = append(fi.Models, modelInfo{Name: k.String(), Lambda: f})
				}
			}
			if len(fi.Models) > 0 {
				pg.Finished = fi
			}
		}
	}

	var b []byte
	var saved string
	err = db.QueryRowContext(ctx, `SELECT state, saved_at FROM crff_coordinator_state WHERE id = 1`).Scan(&b, &saved)
	if errors.Is(err, sql.ErrNoRows) {
		return nil
	}
	if err != nil {
		return err
	}
	st, err := federation.DecodeState(b)
	if err != nil {
		return fmt.Errorf("decode the saved state: %w", err)
	}
	return pg.state(st, saved)
}

// state fills the section of the run in progress.
func (pg *coordinatorPage) state(st *federation.State, saved string) error {
	si := &stateInfo{Run: st.RunID, Step: st.Step, Saved: saved}
	for i, name := range st.Sites {
		r := siteRow{Name: name}
		if i < len(st.Rows) {
			r.Rows = st.Rows[i]
		}
		if i < len(st.Dropped) {
			r.Dropped = st.Dropped[i]
		}
		si.Sites = append(si.Sites, r)
	}
	if st.Checkpoint != nil {
		si.Training = fmt.Sprintf("%s, round %d", st.ModelLabel(st.Kind), st.Checkpoint.Round)
	}
	for i, t := range st.Trained {
		if t == nil {
			continue
		}
		m := modelInfo{Name: st.ModelLabel(i), Rounds: t.Rounds, Loss: fmt.Sprintf("%.6g", t.Loss)}
		if z := t.LambdaRows(); len(z) == len(st.Sites) && len(z) > 0 {
			f, err := lambdaFigure(m.Name, st.Sites, z)
			if err != nil {
				return err
			}
			m.Lambda = f
		}
		si.Models = append(si.Models, m)
	}
	pg.State = si
	return nil
}
