package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/stockguard/shop/cmd/shop/internal/sale"
	"github.com/stockguard/shop/internal/buyer"
	"github.com/stockguard/shop/internal/config"
	"github.com/stockguard/shop/internal/httpapi"
	"github.com/stockguard/shop/loadtest"
)

const loadUsage = `usage: shop load --target URL[,URL...] --admin-token T --sku NAME --stock S --buyers D [flags]

Sends the bench's loads to a running deployment of the shop, which it
never starts: a burst of D buyers at S units, with --rate a steady load,
with --closed a closed loop and one of refusals, and with --surge an open
loop past capacity, round robin over the targets. It first asks each
target's GET /readyz, and refuses to run unless every one answers 200.
Each load has a SKU of its own, NAME-burst, NAME-steady,
NAME-closed-<buyers>, NAME-refusals-<buyers> and NAME-surge, which must
not be on sale yet; the admin token puts its stock on sale. Each load is audited through the API (the SKU's stock,
and every order answered 201, read as its buyer) and, with --mysql, in
the database as the bench audits it. A broken invariant fails the run.

With SHOP_BUYER_AUTH=jwt on the targets, the buyers carry tokens: minted
with --jwt-secret (SHOP_JWT_SECRET) and the issuer and audience, as
'shop token' mints them, or read from --tokens FILE, one "user<TAB>token"
a line, the buyers taking its lines round robin.

`

func load(ctx context.Context, args []string, getenv config.Getenv, stdout, stderr io.Writer) error {
	f := newPlanFlags("load", stderr, loadUsage)
	fs := f.fs
	targets := fs.String("target", "", "the shop's base URLs, comma-separated, such as http://shop-1:8080; requests go round robin")
	var l sale.Load
	fs.StringVar(&l.Shop.AdminToken, "admin-token", getenv("SHOP_ADMIN_TOKEN"), "the targets' admin token, which puts each load's stock on sale (SHOP_ADMIN_TOKEN)")
	fs.Lookup("admin-token").DefValue = config.Masked("SHOP_ADMIN_TOKEN", l.Shop.AdminToken)
	fs.StringVar(&l.SKU, "sku", "", "the name the loads' SKUs start with: NAME-burst, NAME-steady, NAME-closed-<buyers>, NAME-refusals-<buyers>, NAME-surge; none may be on sale yet")
	fs.StringVar(&l.MySQLDSN, "mysql", "", "the deployment's MySQL DSN, to audit the database too, as the bench does; empty audits through the API alone")
	tokens := fs.String("tokens", "", `a file of buyer tokens, one "user<TAB>token" a line, for targets with SHOP_BUYER_AUTH=jwt; the buyers take its lines round robin`)
	readToken := config.Flags(fs, getenv, nil, config.ForToken)
	if err := f.parsePlan(args); err != nil {
		return err
	}
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	for _, t := range config.List(*targets) {
		u, err := url.Parse(t)
		if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || strings.Trim(u.Path, "/") != "" || u.RawQuery != "" {
			bad("--target %q: want a base URL such as http://shop-1:8080", t)
			continue
		}
		l.Shop.URLs = append(l.Shop.URLs, strings.TrimSuffix(t, "/"))
	}
	if *targets == "" {
		bad("--target is required: the base URLs of the running shop, comma-separated")
	}
	if l.Shop.AdminToken == "" {
		bad("--admin-token is required (or SHOP_ADMIN_TOKEN): the targets' admin token puts each load's stock on sale")
	}
	if l.SKU == "" || !httpapi.ValidID(l.SKU+"-refusals-1000000") {
		bad("--sku is required: the name the loads' SKUs start with, short visible ASCII, such as flash-1 (got %q)", l.SKU)
	}
	if f.plan.Burst.Buyers < 1 {
		bad("--buyers must be at least 1, not %d", f.plan.Burst.Buyers)
	}
	f.plan.Instances = max(1, len(l.Shop.URLs))
	if err := errors.Join(errs...); err != nil {
		fs.Usage()
		return err
	}
	cfg, err := readToken()
	if err != nil {
		return err
	}
	if l.Shop.Buyers, err = loadBuyers(*tokens, cfg); err != nil {
		return err
	}
	l.Plan = f.plan
	rep, err := f.report(ctx, "shop load", args, stdout, stderr, func(p sale.Progress) (*loadtest.Report, error) {
		l.Progress = p
		return l.Run(ctx)
	})
	if err == nil && len(rep.Problems()) > 0 {
		err = fmt.Errorf("the run failed: %s", strings.Join(rep.Problems(), "; "))
	}
	return err
}

// loadBuyers returns who buys for `shop load`: the users of a token file,
// or users whose tokens are minted with cfg's secret, or, with neither,
// nil: buyers with no token.
func loadBuyers(file string, cfg config.Config) (loadtest.Buyers, error) {
	if file != "" {
		return readTokens(file)
	}
	if cfg.JWTSecret == "" {
		return nil, nil
	}
	m := minted{cfg}
	if _, err := m.Token("check"); err != nil {
		return nil, fmt.Errorf("SHOP_JWT_SECRET: %w", err)
	}
	return m, nil
}

// minted names buyer i of a load buyer-<run>-<i>, with a token as `shop
// token` mints it.
type minted struct{ cfg config.Config }

func (minted) Buyer(run string, i int) string { return fmt.Sprintf("buyer-%s-%d", run, i) }

func (m minted) Token(user string) (string, error) { return mint(m.cfg, user, tokenTTL) }

// tokenFile is the buyers of a token file: buyer i of a load is its line
// i, round robin.
type tokenFile struct {
	users  []string
	tokens map[string]string
}

// readTokens reads a token file, one "user<TAB>token" a line; blank lines
// and lines starting with # are skipped.
func readTokens(name string) (tokenFile, error) {
	file, err := os.Open(name)
	if err != nil {
		return tokenFile{}, fmt.Errorf("--tokens: %w", err)
	}
	defer file.Close()
	tf := tokenFile{tokens: make(map[string]string)}
	sc := bufio.NewScanner(file)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		user, token, ok := strings.Cut(line, "\t")
		if !ok || !httpapi.ValidID(user) || token == "" {
			return tokenFile{}, fmt.Errorf("--tokens %s:%d: want user<TAB>token", name, n)
		}
		if _, dup := tf.tokens[user]; !dup {
			tf.users = append(tf.users, user)
		}
		tf.tokens[user] = token
	}
	if err := sc.Err(); err != nil {
		return tokenFile{}, fmt.Errorf("--tokens: %w", err)
	}
	if len(tf.users) == 0 {
		return tokenFile{}, fmt.Errorf("--tokens %s: no tokens", name)
	}
	return tf, nil
}

func (tf tokenFile) Buyer(_ string, i int) string { return tf.users[i%len(tf.users)] }

func (tf tokenFile) Token(user string) (string, error) {
	if t, ok := tf.tokens[user]; ok {
		return t, nil
	}
	return "", fmt.Errorf("no token for %q", user)
}

// mint signs a buyer token for user with cfg's SHOP_JWT_SECRET, issuer and
// audience, valid for ttl.
func mint(cfg config.Config, user string, ttl time.Duration) (string, error) {
	return buyer.Mint([]byte(cfg.JWTSecret), buyer.Token{Subject: user, TTL: ttl, Issuer: cfg.JWTIssuer, Audience: cfg.JWTAudience})
}
