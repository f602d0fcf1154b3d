package idempotency

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// The answers to orders that a key keeps, in its record (Record), whoever
// keeps it: the order service, or the scripts of a stock kept in Redis.
// Each is one byte of kind, then its fields, a few bytes in all:
//
//	o<id>:<created>[:<deadline>]  an order (times in µs of the Unix epoch); with a deadline, placed pending
//	s[<SKU>\n<SKU>…]             sold out: the SKUs found short, or none for the request's own
//	l<limit>:<held>               over the per-user limit: the limit, and what the user held
//	r<id>                         the key has another order, id
//	n                             the SKU is not on sale
//
// A script that keeps the answers it decides gets them from Go, made
// here: sold out whole, and over the limit as LimitPrefix, which the
// script ends with what the user held, the one thing only it knows.

// AnswerKind is the kind of a kept answer: its first byte.
type AnswerKind byte

// The kinds of answer.
const (
	Placed    AnswerKind = 'o'
	SoldOut   AnswerKind = 's'
	OverLimit AnswerKind = 'l'
	Reused    AnswerKind = 'r'
	NotFound  AnswerKind = 'n'
)

// Answer is an answer to an order, as a key keeps it.
type Answer struct {
	Kind     AnswerKind
	ID       int64      // Placed: the order's; Reused: the key's order's
	Created  time.Time  // Placed
	Deadline *time.Time // Placed pending: its payment deadline
	Short    string     // SoldOut: the SKUs found short, newline-separated; "" for the request's own
	Limit    int        // OverLimit
	Held     int        // OverLimit
}

// Encode is a as it is kept.
func (a Answer) Encode() string {
	switch a.Kind {
	case Placed:
		s := "o" + strconv.FormatInt(a.ID, 10) + ":" + strconv.FormatInt(a.Created.UnixMicro(), 10)
		if a.Deadline != nil {
			s += ":" + strconv.FormatInt(a.Deadline.UnixMicro(), 10)
		}
		return s
	case SoldOut:
		return "s" + a.Short
	case OverLimit:
		return LimitPrefix(a.Limit) + strconv.Itoa(a.Held)
	case Reused:
		return "r" + strconv.FormatInt(a.ID, 10)
	}
	return string(a.Kind)
}

// LimitPrefix is the start of an answer over limit: the script that
// decides it appends what the user held.
func LimitPrefix(limit int) string { return "l" + strconv.Itoa(limit) + ":" }

// ParseAnswer reads a kept answer back.
func ParseAnswer(s string) (Answer, error) {
	if s == "" {
		return Answer{}, fmt.Errorf("idempotency: an empty answer")
	}
	a := Answer{Kind: AnswerKind(s[0])}
	rest := s[1:]
	fields := strings.Split(rest, ":")
	ints := make([]int64, len(fields))
	var err error
	for i, f := range fields {
		if ints[i], err = strconv.ParseInt(f, 10, 64); err != nil {
			break
		}
	}
	switch {
	case a.Kind == Placed && err == nil && (len(ints) == 2 || len(ints) == 3):
		a.ID, a.Created = ints[0], time.UnixMicro(ints[1]).UTC()
		if len(ints) == 3 {
			deadline := time.UnixMicro(ints[2]).UTC()
			a.Deadline = &deadline
		}
	case a.Kind == SoldOut:
		a.Short = rest
	case a.Kind == OverLimit && err == nil && len(ints) == 2:
		a.Limit, a.Held = int(ints[0]), int(ints[1])
	case a.Kind == Reused && err == nil && len(ints) == 1:
		a.ID = ints[0]
	case a.Kind == NotFound && rest == "":
	default:
		return Answer{}, fmt.Errorf("idempotency: a malformed answer: %q", s)
	}
	return a, nil
}
