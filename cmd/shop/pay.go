package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/internal/idempotency"
	"github.com/stockguard/shop/internal/payment"
)

// payTimeout bounds one callback of `shop pay`, the answer included.
const payTimeout = 30 * time.Second

// pay sends a payment callback for order ORDER_ID, as the payment provider
// would: {"payment_id":"PAYMENT_ID"}, signed with SHOP_PAYMENT_SECRET. It
// prints the answer's status line and body, and fails on an answer that
// is not 2xx, so that a script can tell.
func pay(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	fs := newFlags("pay", "usage: shop pay ORDER_ID PAYMENT_ID [--url URL]\n\n"+
		"Sends the payment provider's callback for ORDER_ID, signed with SHOP_PAYMENT_SECRET,\n"+
		"and prints the answer. It fails unless the answer is 2xx.\n\n", stderr)
	url := fs.String("url", "http://localhost:8080", "the shop's base URL")
	read := config.Flags(fs, getenv, nil, config.ForPay)
	pos, err := parseInterleaved(fs, args)
	if err != nil {
		return err
	}
	if len(pos) != 2 {
		usageLine(stderr, "usage: shop pay ORDER_ID PAYMENT_ID [--url URL]")
		return fmt.Errorf("want ORDER_ID and PAYMENT_ID, got %d argument(s)", len(pos))
	}
	if id, err := strconv.ParseInt(pos[0], 10, 64); err != nil || id < 1 {
		return fmt.Errorf("ORDER_ID must be a positive integer, got %q", pos[0])
	}
	if !httpapi.ValidID(pos[1]) {
		return fmt.Errorf("PAYMENT_ID must be 1 to %d visible ASCII characters, got %q", httpapi.MaxIDLength, pos[1])
	}
	cfg, err := read()
	if err != nil {
		return err
	}
	if cfg.PaymentSecret == "" {
		return errors.New("shop pay signs with SHOP_PAYMENT_SECRET (or --payment-secret), which is not set")
	}
	body, err := json.Marshal(struct {
		PaymentID string `json:"payment_id"`
	}{pos[1]})
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, payTimeout)
	defer cancel()
	target := strings.TrimRight(*url, "/") + "/api/v1/orders/" + pos[0] + "/pay"
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, target, bytes.NewReader(body))
	if err != nil {
		return err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set(payment.Header, payment.Sign([]byte(cfg.PaymentSecret), time.Now(), body))
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	answer, err := io.ReadAll(resp.Body)
	if err != nil {
		return fmt.Errorf("reading the answer: %w", err)
	}
	fmt.Fprintf(stdout, "%s %s\n", resp.Proto, resp.Status)
	if v := resp.Header.Get(idempotency.ReplayedHeader); v != "" {
		fmt.Fprintf(stdout, "%s: %s\n", idempotency.ReplayedHeader, v)
	}
	fmt.Fprintf(stdout, "\n%s\n", bytes.TrimRight(answer, "\n"))
	if resp.StatusCode/100 != 2 {
		return fmt.Errorf("the shop answered %s", resp.Status)
	}
	return nil
}
