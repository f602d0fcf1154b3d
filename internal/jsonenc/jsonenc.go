// Package jsonenc appends JSON by hand where encoding/json's reflection
// costs more than the value: an order's answer and events, and the load
// generator's requests.
package jsonenc

import "encoding/json"

// AppendString appends s as a JSON string, byte for byte what
// encoding/json writes: printable ASCII that it leaves as it is goes as
// it is; anything else goes through encoding/json, for its escapes.
func AppendString(b []byte, s string) []byte {
	for i := range len(s) {
		if c := s[i]; c < ' ' || c > '~' || c == '"' || c == '\\' || c == '<' || c == '>' || c == '&' {
			q, _ := json.Marshal(s) // a string always encodes
			return append(b, q...)
		}
	}
	return append(append(append(b, '"'), s...), '"')
}
