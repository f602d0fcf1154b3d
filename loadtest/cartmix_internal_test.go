package loadtest

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func TestHotSKUs(t *testing.T) {
	t.Parallel()
	for cart, want := range map[int][]string{
		0: {"s"}, 1: {"s"},
		2: {"s", "s-2", "s-3"}, 3: {"s", "s-2", "s-3"},
		5: {"s", "s-2", "s-3", "s-4", "s-5"},
	} {
		if got := HotSKUs("s", cart); !slices.Equal(got, want) {
			t.Errorf("HotSKUs(s, %d) = %q, want %q", cart, got, want)
		}
	}
}

// TestDrawCart: a cart holds 2 to its most lines of distinct hot SKUs;
// over many carts every size comes, and every pair in both orders; the
// same seed draws the same carts.
func TestDrawCart(t *testing.T) {
	t.Parallel()
	for _, lines := range []int{2, 3, 5} {
		t.Run(fmt.Sprint(lines, " lines"), func(t *testing.T) {
			t.Parallel()
			hot := HotSKUs("s", lines)
			r, again := rand.New(rand.NewPCG(1, 2)), rand.New(rand.NewPCG(1, 2))
			sizes, before := map[int]int{}, map[[2]string]int{}
			for range 2000 {
				cart := drawCart(r, hot, lines)
				if same := drawCart(again, hot, lines); !slices.Equal(cart, same) {
					t.Fatalf("one seed drew %q, then %q", cart, same)
				}
				sorted := slices.Sorted(slices.Values(cart))
				if len(cart) < 2 || len(cart) > lines || len(slices.Compact(sorted)) != len(cart) {
					t.Fatalf("cart %q: want 2 to %d distinct SKUs", cart, lines)
				}
				sizes[len(cart)]++
				for i, a := range cart {
					if !slices.Contains(hot, a) {
						t.Fatalf("cart %q holds %s, not one of %q", cart, a, hot)
					}
					for _, b := range cart[i+1:] {
						before[[2]string{a, b}]++
					}
				}
			}
			for n := 2; n <= lines; n++ {
				if sizes[n] == 0 {
					t.Errorf("no cart of %d lines in 2000: %v", n, sizes)
				}
			}
			for _, a := range hot {
				for _, b := range hot {
					if a != b && before[[2]string{a, b}] == 0 {
						t.Errorf("%s never came before %s in 2000 carts", a, b)
					}
				}
			}
		})
	}
}
