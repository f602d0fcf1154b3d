package loadtest_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/stockguard/shop/loadtest"
)

// A burst of 10 buyers against a shop with 3 units: every buyer gets an
// answer, classified by status and problem type. What was really sold is
// for package audit to say, from the database.
func ExampleBurst_Run() {
	var mu sync.Mutex
	stock, id := 3, 0
	shop := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if stock == 0 {
			w.WriteHeader(http.StatusConflict)
			fmt.Fprint(w, `{"type":"sold-out"}`)
			return
		}
		stock, id = stock-1, id+1
		w.WriteHeader(http.StatusCreated)
		fmt.Fprintf(w, `{"id":%d}`, id)
	}))
	defer shop.Close()

	stats, err := loadtest.Burst{Buyers: 10}.Run(context.Background(), loadtest.Shop{URLs: []string{shop.URL}}, "phone", nil)
	if err != nil {
		panic(err)
	}
	fmt.Println("ordered", stats.Ordered, "sold out", stats.SoldOut, "errors", stats.Errors)
	// Output: ordered 3 sold out 7 errors 0
}

func ExampleClassify() {
	fmt.Println(loadtest.Classify(http.StatusCreated, ""))
	fmt.Println(loadtest.Classify(http.StatusConflict, "sold-out"))
	fmt.Println(loadtest.Classify(http.StatusConflict, "limit-reached"))
	fmt.Println(loadtest.Classify(http.StatusServiceUnavailable, "busy"))
	fmt.Println(loadtest.Classify(http.StatusInternalServerError, "internal"))
	// Output:
	// ordered
	// sold-out
	// limit-reached
	// busy
	// error
}
