package order

import (
	"reflect"
	"testing"

	"github.com/stockguard/shop/internal/stock"
)

// TestCompleteFillsEveryStep: a placement of a guard alone comes out of
// NewService with every step the service calls filled in, so that the
// service never asks whether one is there. A step added to Placement
// without the service's own in complete fails here, not on a buyer's
// request. FirstRead, Reconcile and KeepFirst are read at wiring only,
// and may stay nil.
func TestCompleteFillsEveryStep(t *testing.T) {
	t.Parallel()
	optional := map[string]bool{"FirstRead": true, "Reconcile": true, "KeepFirst": true}
	s := NewService(nil, Guarded(stock.NewAtomic(nil), Rules{}), nil)
	v := reflect.ValueOf(s.strategy)
	for i := range v.NumField() {
		f, name := v.Field(i), v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.Interface, reflect.Func, reflect.Pointer, reflect.Map, reflect.Slice:
			if f.IsNil() && !optional[name] {
				t.Errorf("Placement.%s is nil after NewService", name)
			}
		}
	}
}
