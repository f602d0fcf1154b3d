package idempotency

import "strings"

// Where and how every keeper of Idempotency-Keys keeps a key's answer in
// Redis, the scripts that keep them included: one key layout (Key) and
// one stored format, the record (Record, Decode).

// Key is the Redis key that keeps user's Idempotency-Key key in scope,
// what the key names one request of, such as an endpoint: prefix, the
// scope, ":", then the user and the key as Field joins them. prefix starts it: a
// deployment's, or the hash tag of the keys that a script keeps it with.
// The scope's own ":" and "%" are escaped, and a key holds no newline
// (ParseKey), so no two scopes, users or keys share a Redis key, whatever
// the users' ids hold.
func Key(prefix, scope, user, key string) string {
	return prefix + scopeEscaper.Replace(scope) + ":" + Field(user, key)
}

// Field is user's key as one string: the user, a newline and the key. It
// names the key in a Key, and in a hash that a script keeps several
// users' keys in: such a script gets each field from Go.
func Field(user, key string) string { return user + "\n" + key }

var scopeEscaper = strings.NewReplacer("%", "%25", ":", "%3A")

// Record is what Redis keeps under a Key: the fingerprint of the first
// request that used the key, then "|", then the answer that request got,
// as its keeper encodes it. A fingerprint holds no "|"; an answer may hold
// anything. A script that keeps answers reads a record as Decode does.
func Record(fingerprint, answer string) string { return fingerprint + "|" + answer }

// Decode reads a record: the fingerprint of the key's first request, and
// its answer. ok is false for what is no record, such as a script's entry
// id.
func Decode(v string) (fingerprint, answer string, ok bool) {
	return strings.Cut(v, "|")
}
