package loadtest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"sync"

	"github.com/stockguard/shop/internal/audit"
)

// Stock is a SKU's stock as GET /api/v1/stock/{sku} answers it.
type Stock struct {
	Initial   int `json:"initial"`
	Available int `json:"available"`
	Sold      int `json:"sold"`     // units of live orders
	Received  int `json:"received"` // the sum of the SKU's movements
}

// errNotFound is the shop's 404: no such SKU, or no such order.
var errNotFound = errors.New("not found")

// Stock reads sku's stock through the first instance's API. A SKU the
// shop does not have is an error that Fresh tells apart.
func (s Shop) Stock(ctx context.Context, sku string) (Stock, error) {
	var st Stock
	err := s.get(ctx, s.URLs[0]+"/api/v1/stock/"+sku, "", &st)
	if err != nil {
		err = fmt.Errorf("loadtest: stock of %s: %w", sku, err)
	}
	return st, err
}

// Fresh returns an error unless none of skus is on sale yet: a load's
// audit through the API reads the SKU's figures, which must be the load's
// alone.
func (s Shop) Fresh(ctx context.Context, skus []string) error {
	for _, sku := range skus {
		st, err := s.Stock(ctx, sku)
		switch {
		case errors.Is(err, errNotFound):
			continue
		case err != nil:
			return err
		}
		return fmt.Errorf("loadtest: SKU %s is on sale already (%d units, %d sold): a load needs SKUs of its own, name another", sku, st.Initial, st.Sold)
	}
	return nil
}

// apiOrder is what GET /api/v1/orders/{id} answers, as the audit reads it.
type apiOrder struct {
	SKU    string    `json:"sku"`
	Status string    `json:"status"`
	Items  []apiLine `json:"items"` // a cart's lines
}

type apiLine struct {
	SKU string `json:"sku"`
}

// holds reports whether the order is live, holding its units, with a line
// of sku.
func (o apiOrder) holds(sku string) bool {
	live := o.Status == "created" || o.Status == "pending" || o.Status == "paid"
	return live && (o.SKU == sku || slices.Contains(o.Items, apiLine{SKU: sku}))
}

// auditReaders is how many orders the audit reads at once.
const auditReaders = 16

// Audit audits a load on skus through the shop's API alone, for a shop
// whose database it cannot read: each SKU's initial, available, sold and
// received units (GET /api/v1/stock/{sku}), and every order answered 201, read as
// its buyer (GET /api/v1/orders/{id}, round robin): it must exist and be
// live with a line of each of its SKUs, or it counts in LostAcks (an
// order of one SKU) or MissingLines (a cart). Orders counts the
// acknowledged orders found live; Oversold, Undersold and Drift are read
// as package audit reads them. total sums the SKUs, with Orders counting
// an order once.
func (s Shop) Audit(ctx context.Context, skus []string, stats Stats) (total audit.Audit, each []audit.Audit, err error) {
	orders, err := s.readOrders(ctx, stats)
	if err != nil {
		return audit.Audit{}, nil, err
	}
	for _, sku := range skus {
		st, err := s.Stock(ctx, sku)
		if err != nil {
			return audit.Audit{}, nil, err
		}
		a := audit.Audit{SKU: sku, Initial: st.Initial, Available: st.Available, Sold: st.Sold, Received: st.Received,
			Oversold: max(0, st.Sold-st.Received), Drift: st.Available + st.Sold - st.Received}
		if stats.SoldOutSKUs[sku] > 0 {
			a.Undersold = max(0, st.Available)
		}
		for i, o := range stats.Acked {
			switch {
			case !slices.Contains(o.SKUs, sku):
			case orders[i].holds(sku):
				a.Orders++
			case len(o.SKUs) > 1:
				a.MissingLines++
			default:
				a.LostAcks++
			}
		}
		each = append(each, a)
	}
	if len(each) == 1 {
		return each[0], each, nil
	}
	total = audit.Total(each)
	for i, o := range stats.Acked {
		if slices.ContainsFunc(o.SKUs, orders[i].holds) {
			total.Orders++
		}
	}
	return total, each, nil
}

// readOrders reads every acknowledged order of stats, as its buyer, in
// the order of stats.Acked; one the shop does not have is left empty.
func (s Shop) readOrders(ctx context.Context, stats Stats) ([]apiOrder, error) {
	orders := make([]apiOrder, len(stats.Acked))
	errs := make([]error, len(stats.Acked))
	next := make(chan int)
	var wg sync.WaitGroup
	for range min(auditReaders, len(orders)) {
		wg.Go(func() {
			for i := range next {
				id := stats.Acked[i].ID
				token := ""
				if s.Buyers != nil {
					if token, errs[i] = s.Buyers.Token(stats.Owners[id]); errs[i] != nil {
						continue
					}
				}
				url := s.URLs[i%len(s.URLs)] + "/api/v1/orders/" + strconv.FormatInt(id, 10)
				if err := s.get(ctx, url, token, &orders[i]); err != nil && !errors.Is(err, errNotFound) {
					errs[i] = fmt.Errorf("loadtest: order %d: %w", id, err)
				}
			}
		})
	}
	for i := range orders {
		next <- i
	}
	close(next)
	wg.Wait()
	return orders, errors.Join(errs...)
}

// get reads url's JSON answer into v, with a bearer token if one is
// given. A 404 is errNotFound; any other answer but 200 is an error that
// says what it was.
func (s Shop) get(ctx context.Context, url, token string, v any) error {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return err
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	switch {
	case err != nil:
		return err
	case resp.StatusCode == http.StatusNotFound:
		return errNotFound
	case resp.StatusCode != http.StatusOK:
		return fmt.Errorf("GET %s: %s: %.200s", url, resp.Status, data)
	}
	return json.Unmarshal(data, v)
}
