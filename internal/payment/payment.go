// Package payment signs and verifies the payment provider's callbacks, the
// way payment webhooks are signed:
//
//	Shop-Signature: t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">
//
// under a secret that the shop and the provider share. A signature is good
// for Tolerance around its time, so that a captured callback cannot be
// sent again later. See docs/orders.md#payments.
package payment

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Header carries a callback's signature.
const Header = "Shop-Signature"

// Tolerance is how far a signature's time may be from the shop's clock.
const Tolerance = 5 * time.Minute

// ErrSignature means a callback's signature is missing, malformed, wrong,
// or too old.
var ErrSignature = errors.New("payment: bad signature")

// Sign returns the Shop-Signature of body, sent at t, under secret.
func Sign(secret []byte, t time.Time, body []byte) string {
	ts := strconv.FormatInt(t.Unix(), 10)
	return "t=" + ts + ",v1=" + hex.EncodeToString(mac(secret, ts, body))
}

// Verify checks header, a Shop-Signature, against body and secret at now.
// The header may carry several v1 signatures, as during a rotation of the
// secret: one that matches is enough.
func Verify(secret []byte, header string, body []byte, now time.Time) error {
	if len(secret) == 0 {
		return fmt.Errorf("%w: the shop has no payment secret (SHOP_PAYMENT_SECRET)", ErrSignature)
	}
	var ts string
	var sigs [][]byte
	for part := range strings.SplitSeq(header, ",") {
		k, v, _ := strings.Cut(strings.TrimSpace(part), "=")
		switch k {
		case "t":
			ts = v
		case "v1":
			if sig, err := hex.DecodeString(v); err == nil {
				sigs = append(sigs, sig)
			}
		}
	}
	sec, err := strconv.ParseInt(ts, 10, 64)
	if err != nil || len(sigs) == 0 {
		return fmt.Errorf("%w: %s must be t=<unix seconds>,v1=<hex HMAC-SHA256>", ErrSignature, Header)
	}
	if d := now.Sub(time.Unix(sec, 0)); d > Tolerance || d < -Tolerance {
		return fmt.Errorf("%w: signed at %d, more than %s from the shop's clock", ErrSignature, sec, Tolerance)
	}
	want := mac(secret, ts, body)
	for _, sig := range sigs {
		if hmac.Equal(sig, want) {
			return nil
		}
	}
	return fmt.Errorf("%w: no v1 signature matches", ErrSignature)
}

func mac(secret []byte, ts string, body []byte) []byte {
	h := hmac.New(sha256.New, secret)
	h.Write([]byte(ts))
	h.Write([]byte("."))
	h.Write(body)
	return h.Sum(nil)
}
