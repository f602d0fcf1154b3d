package loadtest

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/shop/internal/history"
)

// Shop is the shop under load: one or more instances of one deployment.
type Shop struct {
	URLs       []string // base URLs; buyers go to them round robin
	AdminToken string   // for resetting the stock
	// PaymentSecret is the shop's SHOP_PAYMENT_SECRET, with which an
	// abandoned-cart sale signs its payments as the payment provider does.
	PaymentSecret []byte
	// History, if set, records every request of the load and its answer
	// (internal/history), to be checked answer by answer.
	History *history.Recorder
	// Buyers, if set, names the buyers of a burst, a steady load and a
	// closed loop, and gives each the bearer token that says who it is,
	// for a shop whose buyers authenticate (SHOP_BUYER_AUTH=jwt). Nil
	// names buyer i of a load buyer-<run>-<i>, with no token.
	Buyers Buyers
}

// Buyers says who buys, and proves it.
type Buyers interface {
	// Buyer returns who buyer i of the load run is.
	Buyer(run string, i int) string
	// Token returns the bearer token of a user that Buyer named.
	Token(user string) (string, error)
}

// buyer returns buyer i of the load run, with a fresh Idempotency-Key, and
// the instance it sends to, round robin.
func (s Shop) buyer(run string, i int) (buyer, error) {
	b := buyer{user: "buyer-" + run + "-" + strconv.Itoa(i), key: rand.Text(), url: s.URLs[i%len(s.URLs)]}
	if s.Buyers == nil {
		return b, nil
	}
	b.user = s.Buyers.Buyer(run, i)
	var err error
	b.token, err = s.Buyers.Token(b.user)
	return b, err
}

// newClient returns a client that keeps a connection per worker. The
// transport bounds the wait for an answer: a client Timeout would cost
// every request a context and a timer of its own.
func newClient(workers int) *http.Client {
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = workers
	t.MaxIdleConnsPerHost = workers
	t.ResponseHeaderTimeout = time.Minute
	return &http.Client{Transport: t}
}

// buyer is one buyer's request: who, under which Idempotency-Key, to
// which instance, and the bearer token that proves who, if any.
type buyer struct{ user, key, url, token string }

// line is one line of a cart, as the API takes it.
type line struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// order is an order's body, as the API takes it: of one SKU, or a cart.
type order struct {
	UserID   string `json:"user_id"`
	SKU      string `json:"sku,omitempty"`
	Quantity int    `json:"quantity,omitempty"`
	Items    []line `json:"items,omitempty"`
}

// buy places one order for one unit of each of skus: of one SKU as
// {"sku", "quantity"}, of several as a cart, {"items"}. It classifies the
// answer and returns the order id on a 201, the SKUs that a sold-out named
// short (an order of one SKU's, if it names none), and an error that
// explains any Failed outcome.
func (b buyer) buy(ctx context.Context, client *http.Client, skus []string) (out Outcome, id int64, short []string, err error) {
	o := order{UserID: b.user}
	if len(skus) == 1 {
		o.SKU, o.Quantity = skus[0], 1
	} else {
		o.Items = make([]line, len(skus))
		for i, sku := range skus {
			o.Items[i] = line{SKU: sku, Quantity: 1}
		}
	}
	body := appendOrderBody(make([]byte, 0, 64+len(b.user)+len(skus)*40), o)
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, b.url+"/api/v1/orders", bytes.NewReader(body))
	if err != nil {
		return Failed, 0, nil, err
	}
	// Canonical names, set directly: Set would canonicalize them again.
	req.Header["Content-Type"] = []string{"application/json"}
	req.Header["Idempotency-Key"] = []string{b.key}
	if b.token != "" {
		req.Header["Authorization"] = []string{"Bearer " + b.token}
	}
	// The transport alone: the client's redirects, which an order is
	// never answered with, would copy every request's headers.
	resp, err := client.Transport.RoundTrip(req)
	if err != nil {
		return Failed, 0, nil, err
	}
	defer resp.Body.Close()
	buf, err := readAnswer(resp.Body)
	defer answers.Put(buf)
	if err != nil {
		return Failed, 0, nil, err
	}
	data := buf.Bytes()
	var answer struct {
		ID   int64    `json:"id"`
		Type string   `json:"type"`
		SKUs []string `json:"skus"` // a sold-out's: the SKUs short
	}
	var placed bool
	if resp.StatusCode == http.StatusCreated {
		answer.ID, placed = createdID(data)
	}
	if !placed {
		json.Unmarshal(data, &answer) // a body that is not JSON leaves them empty
	}
	out = Classify(resp.StatusCode, answer.Type)
	fail := func(msg string) (Outcome, int64, []string, error) {
		return Failed, 0, nil, &answerError{status: resp.StatusCode, problem: answer.Type, msg: msg}
	}
	switch {
	case out == Ordered && answer.ID < 1:
		return fail(fmt.Sprintf("201 without an order id: %.200s", data))
	case out == Failed:
		return fail(fmt.Sprintf("%s: %.200s", resp.Status, data))
	case out == SoldOut && len(answer.SKUs) == 0 && len(skus) > 1:
		return fail(fmt.Sprintf("a sold-out cart that names no SKU short: %.200s", data))
	case out == SoldOut && len(answer.SKUs) == 0:
		answer.SKUs = skus
	}
	return out, answer.ID, answer.SKUs, nil
}

// answerError is a Failed outcome that the shop answered, as opposed to
// one it never answered (a transport error or a timeout): its status and
// problem type, which a surge counts it by.
type answerError struct {
	status  int
	problem string
	msg     string
}

func (e *answerError) Error() string { return e.msg }

// SetStock puts quantity units of sku on sale, through the admin API of
// the first instance: a new SKU is set up with them, and an existing one
// keeps its orders. A load starts from nothing on a fresh SKU.
func (s Shop) SetStock(ctx context.Context, sku string, quantity int) error {
	body := fmt.Sprintf(`{"quantity":%d}`, quantity)
	req, err := http.NewRequestWithContext(ctx, http.MethodPut, s.URLs[0]+"/api/v1/stock/"+sku, strings.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Authorization", "Bearer "+s.AdminToken)
	op := history.Op{Client: s.History.Client(), Kind: history.StockSet, Items: []history.Item{{SKU: sku, Quantity: quantity}}, Call: s.History.Now()}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		op.Return, op.Answer = s.History.Now(), history.Error
		s.History.Add(op)
		return fmt.Errorf("loadtest: set stock: %w", err)
	}
	defer resp.Body.Close()
	op.Return, op.Answer = s.History.Now(), history.AnswerOf(resp.StatusCode, "", nil)
	s.History.Add(op)
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("loadtest: set stock: %s: %s", resp.Status, data)
	}
	return nil
}

// WaitReady polls url's /readyz until it answers 200 or ctx ends.
func WaitReady(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	for {
		err := Ready(ctx, url)
		if err == nil || !sleepUntil(ctx, time.Now().Add(50*time.Millisecond)) {
			return err
		}
	}
}

// Ready asks url's /readyz once, for at most 5 seconds, and returns an
// error that names url and what it answered, its status and body or the
// connection's error, unless it answered 200.
func Ready(ctx context.Context, url string) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url+"/readyz", nil)
	if err != nil {
		return fmt.Errorf("loadtest: %s: %w", url, err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("loadtest: %s is not ready: %w", url, err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		data, _ := io.ReadAll(io.LimitReader(resp.Body, 1<<10))
		return fmt.Errorf("loadtest: %s is not ready: GET /readyz answered %s: %s", url, resp.Status, bytes.TrimSpace(data))
	}
	return nil
}

// historyAnswers maps an outcome to the answer its history keeps: every other
// answer is unknown to the model, as a transport error is.
var historyAnswers = [...]history.Answer{Ordered: history.Ordered, SoldOut: history.SoldOut, LimitReached: history.Limit, Busy: history.Busy, Failed: history.Error}

// recordOrder keeps b's order of a unit of each of skus, sent at call,
// and its answer, in the load's history.
func (s Shop) recordOrder(client int, call int64, b buyer, skus []string, out Outcome, id int64, short []string) {
	if s.History == nil {
		return
	}
	items := make([]history.Item, len(skus))
	for i, sku := range skus {
		items[i] = history.Item{SKU: sku, Quantity: 1}
	}
	s.History.Add(history.Op{Client: client, Kind: history.Order, User: b.user, Key: b.key, Items: items,
		Call: call, Return: s.History.Now(), Answer: historyAnswers[out], Order: id, Short: short})
}
