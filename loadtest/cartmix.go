package loadtest

import (
	"fmt"
	"math/rand/v2"
)

// MaxCartLines is the most lines the shop takes in one order.
const MaxCartLines = 20

// HotSKUs returns the SKUs that a load on sku orders, each put on sale
// with the same stock: sku alone, or, with a cart mix of up to cart lines
// (cart at least 2), max(cart, 3) SKUs: sku, then sku-2, sku-3 and so on.
// Three at least, so that carts of two lines draw different pairs.
func HotSKUs(sku string, cart int) []string {
	skus := []string{sku}
	if cart < 2 {
		return skus
	}
	for i := 2; i <= max(cart, 3); i++ {
		skus = append(skus, fmt.Sprintf("%s-%d", sku, i))
	}
	return skus
}

// drawCart returns a cart of 2 to lines distinct SKUs of hot, drawn by r,
// in random order: over many carts each pair of SKUs comes in both orders,
// as real buyers fill their carts: a shop that took the lines in the
// order of the body could deadlock.
func drawCart(r *rand.Rand, hot []string, lines int) []string {
	n := 2 + r.IntN(min(lines, len(hot))-1)
	cart := make([]string, n)
	for i, j := range r.Perm(len(hot))[:n] {
		cart[i] = hot[j]
	}
	return cart
}

// validCart checks a load's cart mix.
func validCart(cart int) error {
	if cart < 0 || cart > MaxCartLines {
		return fmt.Errorf("cart is the most SKUs in an order's cart, 2 to %d, or 0 for orders of one SKU; not %d", MaxCartLines, cart)
	}
	return nil
}

// carts returns what buyer i of a load on sku orders: sku alone, or with
// a cart mix of up to cart lines, a cart drawn from HotSKUs, from a seed
// of the load's own.
func carts(sku string, cart int) func(i int) []string {
	hot := HotSKUs(sku, cart)
	if cart < 2 {
		return func(int) []string { return hot }
	}
	seed := rand.Uint64()
	return func(i int) []string { return drawCart(rand.New(rand.NewPCG(seed, uint64(i))), hot, cart) }
}
