package config

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/crffd/crffd/sandbox"
	"github.com/crffd/crffd/synth"
)

// SimulateOptions are the flags of crffd simulate, as given: each field
// holds the flag of its name (--delta-uniform in DeltaUniform, --binary-outcome
// in Binary).
type SimulateOptions struct {
	Sources, Rows, Replicates int
	Design                    string
	Delta                     string
	DeltaUniform              string
	Seed                      uint64
	Binary                    bool
	Format                    string
	Out                       string
	Federation                bool
}

// DefaultSimulateOptions are the defaults of crffd simulate's flags.
func DefaultSimulateOptions() SimulateOptions {
	return SimulateOptions{Sources: 3, Rows: 1000, Replicates: 1, Seed: 1, Format: "csv", Design: synth.DesignPaper}
}

// Simulation returns the simulation o's flags ask for, refusing flags
// that contradict each other or the design.
func (o SimulateOptions) Simulation() (sandbox.Simulation, error) {
	if !slices.Contains(synth.DesignNames(), o.Design) {
		return sandbox.Simulation{}, fmt.Errorf("--design %q: want one of %s", o.Design, strings.Join(synth.DesignNames(), ", "))
	}
	if o.Binary && o.Design != synth.DesignPaper {
		return sandbox.Simulation{}, fmt.Errorf("--binary-outcome applies to --design %s only; --design %s is a binary-outcome design of its own",
			synth.DesignPaper, synth.DesignBinary)
	}
	if o.Format != sandbox.CSV && o.Format != sandbox.SQLite {
		return sandbox.Simulation{}, fmt.Errorf("--format %q: want csv or sqlite", o.Format)
	}
	if o.Federation && o.Format != sandbox.SQLite {
		return sandbox.Simulation{}, errors.New("--federation needs --format sqlite")
	}
	if o.Format == sandbox.SQLite && o.Replicates != 1 {
		return sandbox.Simulation{}, fmt.Errorf("--replicates %d: the sqlite format writes one replicate", o.Replicates)
	}
	if o.Replicates < 1 {
		return sandbox.Simulation{}, fmt.Errorf("--replicates %d: want at least 1", o.Replicates)
	}
	return sandbox.Simulation{
		Design:     synth.Design{Name: o.Design, Sources: o.Sources, Rows: o.Rows, Seed: o.Seed, BinaryOutcome: o.Binary},
		Replicates: o.Replicates, Deltas: o.Deltas, Format: o.Format, Federation: o.Federation, Dir: o.Out,
	}, nil
}

// parseFloats parses a comma-separated list of numbers; what names the flag.
func parseFloats(s, what string) ([]float64, error) {
	var out []float64
	for _, part := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(part), 64)
		if err != nil {
			return nil, fmt.Errorf("%s: %q is not a number", what, part)
		}
		out = append(out, v)
	}
	return out, nil
}

// Deltas returns Δ per source for replicate seed.
func (o SimulateOptions) Deltas(seed uint64) ([]float64, error) {
	switch {
	case o.Delta != "" && o.DeltaUniform != "":
		return nil, fmt.Errorf("--delta and --delta-uniform exclude each other")
	case o.DeltaUniform != "":
		lohi, err := parseFloats(o.DeltaUniform, "--delta-uniform")
		if err != nil {
			return nil, err
		}
		if len(lohi) != 2 {
			return nil, fmt.Errorf("--delta-uniform: want LO,HI, got %d values", len(lohi))
		}
		return synth.UniformDeltas(o.Sources, lohi[0], lohi[1], seed)
	case o.Delta != "":
		d, err := parseFloats(o.Delta, "--delta")
		if err != nil {
			return nil, err
		}
		if len(d) == 1 {
			for len(d) < o.Sources {
				d = append(d, d[0])
			}
		}
		if len(d) != o.Sources {
			return nil, fmt.Errorf("--delta: %d values for %d sources", len(d), o.Sources)
		}
		return d, nil
	}
	return nil, nil
}
