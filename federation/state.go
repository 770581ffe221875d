package federation

import (
	"context"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"math"
	"time"

	"gonum.org/v1/gonum/mat"

	"github.com/crffd/crffd/estimator"
	"github.com/crffd/crffd/inference"
)

// State is a coordinator's resumable state: what the handshake agreed, the
// models finished, the estimator checkpoint of the model in training, and
// what the finish phase has learned.
type State struct {
	RunID string
	Sites []string
	Step  uint64 // the last step whose envelopes were sent
	Every int    // checkpoint interval in rounds when the state was saved (0: none)
	// Interval is the checkpoint interval in time when the state was saved
	// (0: none, and in states saved before it).
	Interval time.Duration `json:",omitempty"`
	Config   estimator.Config
	Schema   estimator.Schema
	Scaler   estimator.Scaler
	Rows     []int   // per site, after de-duplication
	Dropped  []int   // per site
	Drop     [][]int // per site: the positions of the rows it leaves out
	// Kernels are the names of the further kernels the run chooses among
	// (CoordinatorConfig.Extra), none in states saved before them.
	Kernels []string `json:",omitempty"`
	// Subgroups are the run's federated subgroups
	// (CoordinatorConfig.Subgroups), whose sums FinishState.Gates holds
	// by index; none in states saved before them.
	Subgroups []Subgroup `json:",omitempty"`
	// Kind counts the models trained: the model in training is
	// estimator.Kinds[Kind % 3] of kernel Kind / 3, the run's own
	// kernel's three models first.
	Kind       int
	Checkpoint *estimator.Checkpoint
	Trained    []*estimator.Trained // in training order
	// Finish is nil until every site's local ATE is in. States saved
	// before it existed decode with it nil, which is what they mean.
	Finish *FinishState `json:",omitempty"`
	// Select is the run's model selection configuration, and Selected what
	// it has learned (nil until the sites' statistics are in).
	Select   Selection    `json:",omitempty"`
	Selected *SelectState `json:",omitempty"`
	// Private counts the sites whose answers carry differential privacy
	// noise (their hello says so).
	Private int `json:",omitempty"`
	// Balance is the sum of the sites' balance sums (balance.Sums.Vector),
	// sent back in global-ate; nil when a site sent none.
	Balance []float64 `json:",omitempty"`
}

// models is the number of models the run trains: three per kernel.
func (st *State) models() int { return len(estimator.Kinds) * (1 + len(st.Kernels)) }

// ModelLabel names model i of the run in training order (Trained[i], or
// the one in training when i is Kind) for people: its kind, and for a
// further kernel's model that kernel's name, "latent (laplacian)".
func (st *State) ModelLabel(i int) string {
	return modelLabel(estimator.Kinds[i%len(estimator.Kinds)], i/len(estimator.Kinds), st.Kernels)
}

// roundsBetweenSaves bounds the training steps a coordinator may have sent
// after the checkpoint st: Every, or maxRoundsBetweenSaves when it saved by
// time.
func (st *State) roundsBetweenSaves() uint64 {
	if st.Interval > 0 {
		return maxRoundsBetweenSaves
	}
	return uint64(max(st.Every, 1))
}

// FinishState is what the finish phase of a run has learned, per site in
// the order of State.Sites. The global ATE is not kept: it is a function of
// these, recomputed bit for bit on resume.
type FinishState struct {
	LocalATE []float64        // the plug-in ATE each site answered
	AIPW     []inference.Sums // the sums of each site's AIPW scores
	Clipped  []int            // the rows whose propensity each site clipped; AIPW[s].N counts its rows
	// Gates are, per site, its sums of each of the run's subgroups (nil:
	// not sent).
	Gates [][]*GateSums `json:",omitempty"`
	// Het are, per site, its sums of heterogeneity (nil: not sent).
	Het []*HetSums `json:",omitempty"`
	// Done marks the sites that confirmed the run. A site started with
	// --once leaves once it has, so a resumed coordinator must neither
	// send to it nor wait for it.
	Done []bool
}

// check returns an error unless every list of f holds one entry for each of
// m sites and no row count is negative.
func (f *FinishState) check(m int) error {
	if len(f.LocalATE) != m || len(f.AIPW) != m || len(f.Clipped) != m || len(f.Done) != m {
		return fmt.Errorf("finish phase of %d sites has %d local ATEs, %d AIPW sums, %d clipped counts and %d confirmations",
			m, len(f.LocalATE), len(f.AIPW), len(f.Clipped), len(f.Done))
	}
	for s, a := range f.AIPW {
		if a.N < 0 || f.Clipped[s] < 0 || f.Clipped[s] > a.N {
			return fmt.Errorf("finish phase has site %d with AIPW sums over %d rows and %d clipped", s, a.N, f.Clipped[s])
		}
	}
	if len(f.Het) != 0 && len(f.Het) != m {
		return fmt.Errorf("finish phase of %d sites has heterogeneity sums of %d", m, len(f.Het))
	}
	if len(f.Gates) != 0 && len(f.Gates) != m {
		return fmt.Errorf("finish phase of %d sites has subgroup sums of %d", m, len(f.Gates))
	}
	for s, gs := range f.Gates {
		if len(gs) > MaxSubgroups {
			return fmt.Errorf("finish phase has site %d with sums of %d subgroups, at most %d", s, len(gs), MaxSubgroups)
		}
		for i, g := range gs {
			if g != nil && (g[0] < 0 || g[3] < 0 || g[0]+g[3] > float64(f.AIPW[s].N)) {
				return fmt.Errorf("finish phase has site %d with subgroup %d over %v and %v rows of its %d", s, i, g[0], g[3], f.AIPW[s].N)
			}
		}
	}
	return nil
}

// checkResumable returns an error unless st, loaded from a checkpoint, can
// be resumed by a coordinator of m sites configured with own: every count
// it holds that sizes what the coordinator allocates or indexes is checked
// before the coordinator allocates. The covariates are bounded by
// MaxCovariates, and D, dz and the L-BFGS memory by the larger of own's
// and the defaults (DefaultLimits, estimator.DefaultConfig): the
// checkpoint is the coordinator's own, saved under an earlier
// configuration.
func (st *State) checkResumable(m int, own estimator.Config) error {
	def, defCfg := DefaultLimits(), estimator.DefaultConfig()
	for _, c := range []struct {
		name    string
		v, most int
	}{
		{"covariates", len(st.Schema.Binary), MaxCovariates},
		{"features", st.Config.Features, max(own.Features, def.Features)},
		{"latent", st.Config.Latent, max(own.Latent, def.Latent)},
		{"store", st.Config.Store, max(own.Store, defCfg.Store)},
	} {
		if c.v > c.most {
			return fmt.Errorf("%s %d > %d", c.name, c.v, c.most)
		}
	}
	if cp := st.Checkpoint; cp != nil && (cp.Sites != m || cp.Model != estimator.Kinds[st.Kind%len(estimator.Kinds)]) {
		return fmt.Errorf("the %v model in training has %d sites, want the %v model of %d", cp.Model, cp.Sites, estimator.Kinds[st.Kind%len(estimator.Kinds)], m)
	}
	for i, t := range st.Trained {
		if t == nil || len(t.Weights) != m || t.Lambda == nil {
			return fmt.Errorf("trained model %d lacks the weights or transfer matrix of %d sites", i, m)
		}
		if r, c := t.Lambda.Dims(); r != m || c != m {
			return fmt.Errorf("trained model %d has a %d×%d transfer matrix, want %d×%d", i, r, c, m, m)
		}
	}
	if sel := st.Selected; sel != nil {
		if len(sel.Candidates) != len(sel.Estimators) {
			return fmt.Errorf("model selection of %d candidates and %d estimators", len(sel.Candidates), len(sel.Estimators))
		}
		if sel.Scored && (sel.Chosen < 0 || sel.Chosen >= len(sel.Candidates)) {
			return fmt.Errorf("model selection chose candidate %d of %d", sel.Chosen, len(sel.Candidates))
		}
	}
	return nil
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

// floats is a []float64 that JSON carries as the base64 of its values'
// little-endian bits: exact, and about half the size and a fraction of the
// time of decimal numbers, which made a checkpoint of a 20-site run 33 MB.
// It reads the decimal arrays of states saved before it, too.
type floats []float64

// MarshalJSON implements json.Marshaler.
func (f floats) MarshalJSON() ([]byte, error) {
	b := make([]byte, 8*len(f))
	for i, v := range f {
		binary.LittleEndian.PutUint64(b[8*i:], math.Float64bits(v))
	}
	return json.Marshal(b)
}

// UnmarshalJSON implements json.Unmarshaler.
func (f *floats) UnmarshalJSON(data []byte) error {
	if len(data) > 0 && data[0] == '[' {
		return json.Unmarshal(data, (*[]float64)(f))
	}
	var b []byte
	if err := json.Unmarshal(data, &b); err != nil {
		return err
	}
	if len(b)%8 != 0 {
		return fmt.Errorf("float64 bits of %d bytes", len(b))
	}
	*f = make(floats, len(b)/8)
	for i := range *f {
		(*f)[i] = math.Float64frombits(binary.LittleEndian.Uint64(b[8*i:]))
	}
	return nil
}

// jsonTrained is estimator.Trained with its matrices as plain slices.
type jsonTrained struct {
	Model   estimator.Kind
	Weights []map[string]jsonMatrix
	Shared  map[string]floats
	Lambda  jsonMatrix
	Rounds  int
	Loss    float64
}

type jsonMatrix struct {
	Rows, Cols int
	Data       floats
}

// jsonCheckpoint is estimator.Checkpoint with its vectors as floats.
type jsonCheckpoint struct {
	Model   estimator.Kind
	Sites   int
	Method  estimator.Method
	Round   int
	X, M, V floats
	Step    int
	History []jsonIterate
	Stall   int
	// MaxRounds: estimator.Checkpoint.MaxRounds.
	MaxRounds int `json:",omitempty"`
}

type jsonIterate struct {
	X, Gradient floats
	F           float64
	Round       int
}

type jsonState struct {
	State
	Trained    []jsonTrained
	Checkpoint *jsonCheckpoint `json:",omitempty"`
}

func toJSONCheckpoint(cp *estimator.Checkpoint) *jsonCheckpoint {
	if cp == nil {
		return nil
	}
	j := &jsonCheckpoint{Model: cp.Model, Sites: cp.Sites, Method: cp.Method, Round: cp.Round, X: cp.X, M: cp.M, V: cp.V, Step: cp.Step, Stall: cp.Stall, MaxRounds: cp.MaxRounds}
	for _, it := range cp.History {
		j.History = append(j.History, jsonIterate{X: it.X, Gradient: it.Gradient, F: it.F, Round: it.Round})
	}
	return j
}

func (j *jsonCheckpoint) checkpoint() *estimator.Checkpoint {
	if j == nil {
		return nil
	}
	cp := &estimator.Checkpoint{Model: j.Model, Sites: j.Sites, Method: j.Method, Round: j.Round, X: j.X, M: j.M, V: j.V, Step: j.Step, Stall: j.Stall, MaxRounds: j.MaxRounds}
	for _, it := range j.History {
		cp.History = append(cp.History, estimator.Iterate{X: it.X, Gradient: it.Gradient, F: it.F, Round: it.Round})
	}
	return cp
}

// valid reports whether j's dimensions are positive and its data fills
// them. gonum panics on other dimensions, and Rows*Cols may overflow, so
// the check divides.
func (j jsonMatrix) valid() bool {
	return j.Rows > 0 && j.Cols > 0 && len(j.Data)%j.Cols == 0 && len(j.Data)/j.Cols == j.Rows
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
	js := jsonState{State: *st, Checkpoint: toJSONCheckpoint(st.Checkpoint)}
	js.State.Trained, js.State.Checkpoint = nil, nil
	for _, t := range st.Trained {
		jt := jsonTrained{Model: t.Model, Lambda: toJSONMatrix(t.Lambda), Rounds: t.Rounds, Loss: t.Loss, Shared: map[string]floats{}}
		for k, v := range t.Shared {
			jt.Shared[k] = v
		}
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
	st.Checkpoint = js.Checkpoint.checkpoint()
	if st.Finish != nil {
		if err := st.Finish.check(len(st.Sites)); err != nil {
			return nil, fmt.Errorf("decode coordinator state: %w", err)
		}
	}
	for _, jt := range js.Trained {
		if jt.Lambda.Rows != jt.Lambda.Cols || !jt.Lambda.valid() {
			return nil, fmt.Errorf("decode coordinator state: bad transfer matrix")
		}
		t := &estimator.Trained{Model: jt.Model, Shared: map[string][]float64{}, Rounds: jt.Rounds, Loss: jt.Loss,
			Lambda: mat.NewSymDense(jt.Lambda.Rows, jt.Lambda.Data)}
		for k, v := range jt.Shared {
			t.Shared[k] = v
		}
		for _, mw := range jt.Weights {
			w := map[string]*mat.Dense{}
			for k, v := range mw {
				if !v.valid() {
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
