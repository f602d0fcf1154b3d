package buyer_test

import (
	"errors"
	"fmt"
	"time"

	"github.com/stockguard/shop/internal/buyer"
)

// A token minted with the shop's secret names its buyer; the same token
// checked against another secret is refused.
func ExampleVerifier_Verify() {
	secret := []byte("a secret of at least thirty-two bytes")
	token, err := buyer.Mint(secret, buyer.Token{Subject: "alice", TTL: time.Minute, Audience: "shop"})
	if err != nil {
		panic(err)
	}

	v, err := buyer.NewVerifier(buyer.Keys{Secret: secret, Audience: "shop"})
	if err != nil {
		panic(err)
	}
	fmt.Println(v.Verify("Bearer " + token))

	other, err := buyer.NewVerifier(buyer.Keys{Secret: []byte("another secret, thirty-two bytes long")})
	if err != nil {
		panic(err)
	}
	_, err = other.Verify("Bearer " + token)
	fmt.Println(errors.Is(err, buyer.ErrUnauthorized))
	// Output:
	// alice <nil>
	// true
}
