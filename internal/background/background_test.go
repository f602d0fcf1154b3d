package background_test

import (
	"context"
	"fmt"

	"github.com/stockguard/shop/internal/background"
)

func Example() {
	g := background.New()
	g.Go(func(ctx context.Context) {
		<-ctx.Done() // until End
		fmt.Println("stopped:", ctx.Err())
	})
	g.End()
	fmt.Println("runs after End:", g.Go(func(context.Context) {}))
	// Output:
	// stopped: context canceled
	// runs after End: false
}
