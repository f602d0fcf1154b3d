package idempotency_test

import (
	"fmt"

	"github.com/stockguard/shop/internal/idempotency"
)

// A key may come bare or as a structured-field string; both name the same
// key.
func ExampleParseKey() {
	for _, header := range []string{`8e03978e`, `"8e03978e"`, ``, `"two words"`} {
		key, err := idempotency.ParseKey(header)
		fmt.Printf("%-12q -> %q %v\n", header, key, err)
	}
	// Output:
	// "8e03978e"   -> "8e03978e" <nil>
	// "\"8e03978e\"" -> "8e03978e" <nil>
	// ""           -> "" idempotency: Idempotency-Key header is missing
	// "\"two words\"" -> "" idempotency: Idempotency-Key must be 1 to 255 visible ASCII characters, bare or as a quoted string
}
