package idempotency

import (
	"errors"
	"strings"
)

// Header is the request header that carries the key.
const Header = "Idempotency-Key"

// MaxKeyLength is the longest key accepted, in characters.
const MaxKeyLength = 255

// Errors of ParseKey.
var (
	ErrKeyMissing = errors.New("idempotency: Idempotency-Key header is missing")
	ErrKeyInvalid = errors.New("idempotency: Idempotency-Key must be 1 to 255 visible ASCII characters, bare or as a quoted string")
)

// ParseKey reads an Idempotency-Key header value. The draft defines it as a
// structured-field string ("abc"); clients often send a bare token (abc),
// and both name the same key. The key is 1 to MaxKeyLength visible ASCII
// characters; inside quotes, \" and \\ escape a quote and a backslash.
func ParseKey(v string) (string, error) {
	if v == "" {
		return "", ErrKeyMissing
	}
	if inner, ok := strings.CutPrefix(v, `"`); ok {
		var b strings.Builder
		for i := 0; i < len(inner); i++ {
			switch ch := inner[i]; ch {
			case '"':
				if i != len(inner)-1 {
					return "", ErrKeyInvalid // text after the closing quote
				}
				return checkKey(b.String())
			case '\\':
				if i+1 == len(inner) || (inner[i+1] != '"' && inner[i+1] != '\\') {
					return "", ErrKeyInvalid
				}
				i++
				b.WriteByte(inner[i])
			default:
				b.WriteByte(ch)
			}
		}
		return "", ErrKeyInvalid // no closing quote
	}
	return checkKey(v)
}

func checkKey(k string) (string, error) {
	if len(k) == 0 || len(k) > MaxKeyLength {
		return "", ErrKeyInvalid
	}
	for i := 0; i < len(k); i++ {
		if k[i] <= ' ' || k[i] >= 0x7f {
			return "", ErrKeyInvalid
		}
	}
	return k, nil
}
