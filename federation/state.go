package federation

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
)

// State is a coordinator's resumable state: what the handshake agreed, the
// models finished, and the estimator checkpoint of the model in training.
type State struct {
	RunID      string
	Sites      []string
	Step       uint64 // the last step whose envelopes were sent
	Every      int    // checkpoint interval in rounds when the state was saved
	Config     estimator.Config
	Schema     estimator.Schema
	Scaler     estimator.Scaler
	Rows       []int   // per site, after de-duplication
	Dropped    []int   // per site
	Drop       [][]int // per site: the positions of the rows it leaves out
	Kind       int     // index into estimator.Kinds of the model in training
	Checkpoint *estimator.Checkpoint
	Trained    []*estimator.Trained
}

// Checkpointer stores a coordinator's State.
type Checkpointer interface {
	// Save replaces the stored state with st.
	Save(ctx context.Context, st *State) error
	// Load returns the stored state, or nil when there is none.
	Load(ctx context.Context) (*State, error)
	// Clear forgets the stored state once a run is complete.
	Clear(ctx context.Context) error
}

// MemCheckpoints is a Checkpointer in memory, for tests.
type MemCheckpoints struct {
	mu sync.Mutex
	b  []byte
	// Saves counts the calls of Save.
	Saves int
}

// Save implements Checkpointer.
func (m *MemCheckpoints) Save(_ context.Context, st *State) error {
	b, err := EncodeState(st)
	if err != nil {
		return err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.b = b
	m.Saves++
	return nil
}

// Load implements Checkpointer.
func (m *MemCheckpoints) Load(context.Context) (*State, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.b == nil {
		return nil, nil
	}
	return DecodeState(m.b)
}

// Clear implements Checkpointer.
func (m *MemCheckpoints) Clear(context.Context) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.b = nil
	return nil
}

// jsonTrained is estimator.Trained with its matrices as plain slices.
// encoding/json writes float64 in the shortest form that reads back to the
// same bits, so a checkpoint is exact.
type jsonTrained struct {
	Model   estimator.Kind
	Weights []map[string]jsonMatrix
	Shared  map[string][]float64
	Lambda  jsonMatrix
	Rounds  int
	Loss    float64
}

type jsonMatrix struct {
	Rows, Cols int
	Data       []float64
}

type jsonState struct {
	State
	Trained []jsonTrained
}

func toJSONMatrix(m mat.Matrix) jsonMatrix {
	r, c := m.Dims()
	j := jsonMatrix{Rows: r, Cols: c, Data: make([]float64, 0, r*c)}
	for i := range r {
		for k := range c {
			j.Data = append(j.Data, m.At(i, k))
		}
	}
	return j
}

// EncodeState returns st as JSON.
func EncodeState(st *State) ([]byte, error) {
	js := jsonState{State: *st}
	js.State.Trained = nil
	for _, t := range st.Trained {
		jt := jsonTrained{Model: t.Model, Shared: t.Shared, Lambda: toJSONMatrix(t.Lambda), Rounds: t.Rounds, Loss: t.Loss}
		for _, w := range t.Weights {
			mw := map[string]jsonMatrix{}
			for k, v := range w {
				mw[k] = toJSONMatrix(v)
			}
			jt.Weights = append(jt.Weights, mw)
		}
		js.Trained = append(js.Trained, jt)
	}
	return json.Marshal(js)
}

// DecodeState reads EncodeState's output.
func DecodeState(b []byte) (*State, error) {
	var js jsonState
	if err := json.Unmarshal(b, &js); err != nil {
		return nil, fmt.Errorf("decode coordinator state: %w", err)
	}
	st := js.State
	for _, jt := range js.Trained {
		if jt.Lambda.Rows != jt.Lambda.Cols || len(jt.Lambda.Data) != jt.Lambda.Rows*jt.Lambda.Cols || jt.Lambda.Rows == 0 {
			return nil, fmt.Errorf("decode coordinator state: bad transfer matrix")
		}
		t := &estimator.Trained{Model: jt.Model, Shared: jt.Shared, Rounds: jt.Rounds, Loss: jt.Loss,
			Lambda: mat.NewSymDense(jt.Lambda.Rows, jt.Lambda.Data)}
		for _, mw := range jt.Weights {
			w := map[string]*mat.Dense{}
			for k, v := range mw {
				if v.Rows*v.Cols != len(v.Data) || v.Rows == 0 || v.Cols == 0 {
					return nil, fmt.Errorf("decode coordinator state: bad weight block %q", k)
				}
				w[k] = mat.NewDense(v.Rows, v.Cols, v.Data)
			}
			t.Weights = append(t.Weights, w)
		}
		st.Trained = append(st.Trained, t)
	}
	return &st, nil
}
