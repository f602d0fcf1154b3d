// Package buyer says who a buyer is and how often the buyer may ask: it
// verifies buyers' JSON Web Tokens (HS256 with a shared secret, or RS256
// and ES256 with a public key) and keeps a per-buyer rate limit in Redis,
// shared by every instance. See docs/api.md#buyers.
package buyer

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rsa"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/golang-jwt/jwt/v5"
)

// Errors of the package. Callers test them with errors.Is.
var (
	// ErrUnauthorized: the request carries no token, or one that is
	// malformed, expired, wrongly signed or made for another issuer or
	// audience.
	ErrUnauthorized = errors.New("buyer: unauthorized")
	// ErrForbidden: the request names another user than its token's.
	ErrForbidden = errors.New("buyer: the request names another user than its token")
	// ErrRateLimited: the buyer is over the rate limit. The error is a
	// *LimitedError, which says when to retry.
	ErrRateLimited = errors.New("buyer: rate limited")
)

// MinSecret is the shortest HS256 secret accepted: RFC 7518 §3.2 asks for
// a key at least as long as the hash, 256 bits.
const MinSecret = 32

// Keys verify tokens. Set Secret for HS256 or PublicKey for RS256 (an RSA
// key) or ES256 (an ECDSA P-256 key); Issuer and Audience, when set, must
// be in every token.
type Keys struct {
	Secret    []byte
	PublicKey any // *rsa.PublicKey or *ecdsa.PublicKey, as ReadPublicKey returns
	Issuer    string
	Audience  string
}

// Verifier checks buyers' tokens.
type Verifier struct {
	parser *jwt.Parser
	key    any
}

// NewVerifier returns a Verifier that accepts only tokens signed with the
// one algorithm its key is for: never "none", and never HS256 signed with
// a public key.
func NewVerifier(k Keys) (*Verifier, error) {
	var alg string
	var key any
	switch pub := k.PublicKey.(type) {
	case nil:
		if len(k.Secret) < MinSecret {
			return nil, fmt.Errorf("buyer: the HS256 secret has %d bytes, at least %d are needed", len(k.Secret), MinSecret)
		}
		alg, key = jwt.SigningMethodHS256.Alg(), k.Secret
	case *rsa.PublicKey:
		alg, key = jwt.SigningMethodRS256.Alg(), pub
	case *ecdsa.PublicKey:
		if pub.Curve != elliptic.P256() {
			return nil, errors.New("buyer: ES256 needs a P-256 key")
		}
		alg, key = jwt.SigningMethodES256.Alg(), pub
	default:
		return nil, fmt.Errorf("buyer: unsupported public key %T", k.PublicKey)
	}
	if k.PublicKey != nil && len(k.Secret) > 0 {
		return nil, errors.New("buyer: a secret and a public key: give one")
	}
	opts := []jwt.ParserOption{jwt.WithValidMethods([]string{alg}), jwt.WithExpirationRequired(), jwt.WithStrictDecoding()}
	if k.Issuer != "" {
		opts = append(opts, jwt.WithIssuer(k.Issuer))
	}
	if k.Audience != "" {
		opts = append(opts, jwt.WithAudience(k.Audience))
	}
	return &Verifier{parser: jwt.NewParser(opts...), key: key}, nil
}

// Verify reads an Authorization header, "Bearer <token>", and returns the
// token's subject, the buyer. Every failure is ErrUnauthorized.
func (v *Verifier) Verify(authorization string) (subject string, err error) {
	scheme, token, ok := strings.Cut(authorization, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", fmt.Errorf("%w: Authorization: Bearer <token> is required", ErrUnauthorized)
	}
	var claims jwt.RegisteredClaims
	if _, err := v.parser.ParseWithClaims(token, &claims, func(*jwt.Token) (any, error) { return v.key, nil }); err != nil {
		return "", fmt.Errorf("%w: %w", ErrUnauthorized, err)
	}
	if claims.Subject == "" {
		return "", fmt.Errorf("%w: the token has no sub", ErrUnauthorized)
	}
	return claims.Subject, nil
}

// Token is what Mint puts in a token.
type Token struct {
	Subject  string
	TTL      time.Duration
	Issuer   string // optional
	Audience string // optional
}

// Mint signs t with secret, HS256, valid from now for t.TTL.
func Mint(secret []byte, t Token) (string, error) {
	if len(secret) < MinSecret {
		return "", fmt.Errorf("buyer: the HS256 secret has %d bytes, at least %d are needed", len(secret), MinSecret)
	}
	now := time.Now()
	claims := jwt.RegisteredClaims{
		Subject:   t.Subject,
		Issuer:    t.Issuer,
		IssuedAt:  jwt.NewNumericDate(now),
		ExpiresAt: jwt.NewNumericDate(now.Add(t.TTL)),
	}
	if t.Audience != "" {
		claims.Audience = jwt.ClaimStrings{t.Audience}
	}
	return jwt.NewWithClaims(jwt.SigningMethodHS256, claims).SignedString(secret)
}

// ReadPublicKey reads a PEM file holding an RSA or ECDSA public key.
func ReadPublicKey(path string) (any, error) {
	pem, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	if key, err := jwt.ParseRSAPublicKeyFromPEM(pem); err == nil {
		return key, nil
	}
	if key, err := jwt.ParseECPublicKeyFromPEM(pem); err == nil {
		return key, nil
	}
	return nil, fmt.Errorf("%s holds no PEM RSA or ECDSA public key", path)
}
