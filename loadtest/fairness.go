package loadtest

import (
	"slices"
	"sort"
	"time"
)

// DefaultOvertakeGap is the gap Fair counts overtakes at when none is
// given: arrivals closer than this are taken as simultaneous.
const DefaultOvertakeGap = 10 * time.Millisecond

// Arrival is one buyer of a burst whose buyers arrive in order: its rank
// (1 arrived first), when it was sent and answered, counted from the
// burst's start, and its answer.
type Arrival struct {
	Rank     int
	Sent     time.Duration
	Answered time.Duration
	Outcome  Outcome
}

// Fairness says whom a sale served: whether buyers were served in the
// order they arrived. See docs/benchmark.md.
type Fairness struct {
	// FirstComeShare is the share of the W winners that were among the
	// first W arrivals: 1 is first come, first served.
	FirstComeShare float64 `json:"first_come_share"`
	// Overtakes counts the pairs in which a buyer refused (sold out or
	// busy) had arrived at least the gap before one who won;
	// OvertakesPer1000 is that per 1,000 winners, and MaxOvertakeGapMS
	// the largest arrival gap among them.
	Overtakes        int64   `json:"overtakes"`
	OvertakesPer1000 float64 `json:"overtakes_per_1000"`
	MaxOvertakeGapMS float64 `json:"max_overtake_gap_ms"`
	GapMS            float64 `json:"overtake_gap_ms"` // the gap counted at
	// LatestWinnerRank is the highest arrival rank that won.
	LatestWinnerRank int `json:"latest_winner_rank"`
	// LongestWaitMS is the longest any buyer waited for its answer, and
	// LongestWaitRank that buyer's rank.
	LongestWaitMS   float64 `json:"longest_wait_ms"`
	LongestWaitRank int     `json:"longest_wait_rank"`
	Winners         int     `json:"winners"`
}

// Fairness measures the fairness of s, a run of b, if b's buyers arrived
// in order; nil if not.
func (b Burst) Fairness(s Stats) *Fairness {
	if b.Arrivals <= 0 || len(s.Arrivals) == 0 {
		return nil
	}
	f := Fair(s.Arrivals, overtakeGap(b))
	return &f
}

// refused reports whether the buyer was sent away: told sold out, or
// busy. A failed request was not answered at all.
func (a Arrival) refused() bool { return a.Outcome == SoldOut || a.Outcome == Busy }

// Fair measures the fairness of a burst from its arrivals, counting an
// overtake where a refused buyer arrived at least gap before a winner. It
// sorts the refused buyers' send times once and counts, for each winner,
// those sent gap or more before it by binary search: n log n.
func Fair(arrivals []Arrival, gap time.Duration) Fairness {
	f := Fairness{GapMS: ms(gap)}
	var refused []time.Duration
	for _, a := range arrivals {
		if a.refused() {
			refused = append(refused, a.Sent)
		}
		if wait := a.Answered - a.Sent; ms(wait) > f.LongestWaitMS {
			f.LongestWaitMS, f.LongestWaitRank = ms(wait), a.Rank
		}
		if a.Outcome == Ordered {
			f.Winners++
			f.LatestWinnerRank = max(f.LatestWinnerRank, a.Rank)
		}
	}
	if f.Winners == 0 {
		return f
	}
	slices.Sort(refused)
	early := 0
	for _, a := range arrivals {
		if a.Outcome != Ordered {
			continue
		}
		if a.Rank <= f.Winners {
			early++
		}
		// The refused buyers sent at or before a.Sent-gap.
		k := sort.Search(len(refused), func(i int) bool { return refused[i] > a.Sent-gap })
		if k > 0 {
			f.Overtakes += int64(k)
			f.MaxOvertakeGapMS = max(f.MaxOvertakeGapMS, ms(a.Sent-refused[0]))
		}
	}
	f.FirstComeShare = float64(early) / float64(f.Winners)
	f.OvertakesPer1000 = float64(f.Overtakes) * 1000 / float64(f.Winners)
	return f
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
