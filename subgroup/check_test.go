package subgroup_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/crffd/crffd/subgroup"
)

// columns are those of the records table the SQLite tests create; "group"
// is there because it is also an SQL keyword.
var columns = []string{"age", "sex", "site_code", "bmi", "region", "score", "name", "group"}

// accepted predicates must pass Check and run in SQLite.
var accepted = []string{
	`age >= 65 AND sex = 1`,
	`"Age" between 18 and 40`,
	`lower(site_code) = 'north'`,
	`bmi IS NOT NULL AND bmi > 30`,
	`region IN ('a', 'b')`,
	`score * 2 - 1 > 0.5e1`,
	`name = 'O''Brien; DROP TABLE x'`,
	`name = 'a -- b /* c */ ) ( "d'`,
	`[age] > 1 AND ` + "`sex`" + ` = 0`,
	`"group" = 1`,
	`"AGE" <> 3`,
	"age >= 65\n\tAND sex = 1\r\n",
	`(age > 1) AND (((sex = 0) OR NOT (bmi < 20)))`,
	`CASE WHEN age > 60 THEN 1 WHEN age > 40 THEN 2 ELSE 0 END = 1`,
	`CAST(score AS INTEGER) = 1 OR cast (bmi as real) > 1.5 OR CAST(age AS TEXT) = '3' OR CAST(name AS NUMERIC) = 0`,
	`name COLLATE NOCASE = 'ann' OR name = 'x' COLLATE binary OR region COLLATE RTRIM = 'a'`,
	`coalesce(bmi, 0) > 25 AND ifnull(score, 0) >= 0 AND nullif(age, 0) IS NOT NULL`,
	`iif(sex = 1, age, 0) > 50`,
	`abs (score) < 1 AND ROUND(bmi, 1) >= 30.0 AND Length(name) <= 10`,
	`substr(name, 1, 1) = 'O' AND instr(name, 'B') > 0 AND upper(name) != 'X'`,
	`trim(region) = 'a' OR ltrim(name, 'O') = 'x' OR rtrim(name) = 'x'`,
	`name LIKE 'a%' ESCAPE '\' OR name NOT LIKE '_b%' OR name GLOB 'A*'`,
	`age NOT BETWEEN 1 AND 2 AND age NOT IN (3, 4, 5)`,
	`age IS NULL OR sex IS NOT NULL OR bmi IS TRUE OR score IS NOT FALSE`,
	`0x1F & age = 1 OR age | 2 = 3 OR age << 1 > 4 OR age >> 1 = 0 OR ~sex = -2`,
	`age % 2 = 0 AND age / 2 == 3 AND -age < 0 AND +age > 0 AND age - -1 > 0`,
	`name || 'x' = 'ax'`,
	`.5 < score AND 1. < score AND 1E+2 > age AND 1e-2 < bmi AND 2.5E3 > 0`,
	`TRUE`,
	`NOT age`,
	`name = '' OR name = 'ünïcödé' OR name = 'tab	and newline
inside'`,
	`age IN ()`,
	`age = 1 = 1`,
}

// refused predicates must fail Check; token is a part of the message that
// names the offending token.
var refused = []struct {
	predicate string
	token     string
}{
	{`1=1; DROP TABLE records`, `";" at 3`},
	{`age > (SELECT avg(age) FROM records)`, `"SELECT" at 7`},
	{`age IN (SELECT age FROM other)`, `"SELECT" at 8`},
	{`exists (select 1)`, `"exists" at 0`},
	{`main.records.age > 1`, `"main.records" at 0`},
	{`load_extension('x')`, `"load_extension" at 0`},
	{`random() > 0`, `"random" at 0`},
	{`sqlite_version() = 1`, `"sqlite_version" at 0`},
	{`age > 1 -- comment`, `"--" at 8`},
	{`age > 1 /* x */`, `"/*" at 8`},
	{`age = ?`, `"?" at 6`},
	{`age = ?1`, `"?1" at 6`},
	{`age = :a`, `":a" at 6`},
	{`age = @a`, `"@a" at 6`},
	{`age = $a`, `"$a" at 6`},
	{`1=1) OR (1=1`, `")" at 3`},
	{`(age > 1`, `"(" at 0`},
	{`unknown_col = 1`, `"unknown_col" at 0`},
	{`'unterminated`, `"'unterminated" at 0`},
	{`""`, "`\"\"` at 0"},
	{`age > 1 UNION SELECT 1`, `"UNION" at 8`},
	{strings.Repeat(`age > 1 OR `, 454) + `age>=1`, `5000 bytes`},
	{strings.Repeat("(", 100) + "age > 1" + strings.Repeat(")", 100), `"(" at 64`},
	{``, `empty`},
	{" \t\r\n ", `empty`},
	{`t.age > 1`, `"t.age" at 0`},
	{`"x"."y" = 1`, "`\"x\".\"y\"` at 0"},
	{`age . x = 1`, `"age . x" at 0`},
	{`age IN other`, `"IN" at 4`},
	{`age IN sex`, `"IN" at 4`},
	{`sex (1) = 1`, `"sex" at 0`},
	{`"random"() > 0`, "`\"random\"` at 0"},
	{`[random]() > 0`, `"[random]" at 0`},
	{`replace(name, 'a', 'b') = 'x'`, `"replace" at 0`},
	{`count(*) > 0`, `"count" at 0`},
	{`age$x = 1`, `"age$x" at 0`},
	{`x'00' = name`, `"x'00'" at 0`},
	{`name ->> '$.a' = 1`, `"->>" at 5`},
	{`age ISNULL`, `"ISNULL" at 4`},
	{`group = 1`, `"group" at 0`},
	{`(age, sex) = (1, 2)`, `"," at 4`},
	{`age = 1, 2`, `"," at 7`},
	{`name COLLATE foo = 'x'`, `"foo" at 13`},
	{`name COLLATE`, `"COLLATE" at 5`},
	{`CAST(age AS BLOB) = 1`, `"BLOB" at 12`},
	{`CAST age`, `"CAST" at 0`},
	{`CAST(age AS INTEGER AS REAL)`, `"AS" at 20`},
	{`age AS x`, `"AS" at 4`},
	{"age\x00 = 1", `NUL byte at 3`},
	{"name = 'a\x00'", `NUL byte at 9`},
	{"age\x01 = 1", `U+0001 at 3`},
	{"age\f= 1", `U+000C at 3`},
	{`age > 1_000`, `"1_000" at 6`},
	{`age > 1abc`, `"1abc" at 6`},
	{`0x = 1`, `"0x" at 0`},
	{"age\u00a0>= 65", "non-breaking"},
	{"`unterminated", "`unterminated\" at 0"},
	{`[age`, `"[age" at 0`},
	{`"age`, "`\"age` at 0"},
	{`name = 'it''s`, `"'it''s" at 7`},
	{`CURRENT_DATE > '2020'`, `"CURRENT_DATE" at 0`},
	{`age > 1 )`, `")" at 8`},
	{`age > 1 ) OR (1`, `")" at 8`},
	{`abs(age) OVER () > 0`, `"OVER" at 9`},
	{`age REGEXP 'x'`, `"REGEXP" at 4`},
	{`RAISE(IGNORE)`, `"RAISE" at 0`},
	{`sqlite_master`, `"sqlite_master" at 0`},
	{`age IN pragma_table_info('records')`, `"IN" at 4`},
	{`age = (VALUES (1))`, `"VALUES" at 7`},
	{`age IS NOT DISTINCT FROM 1`, `"DISTINCT" at 11`},
	{`age ! 1`, `"!" at 4`},
	{`age ^ 1`, `"^" at 4`},
	{`rowid = 1`, `"rowid" at 0`},
	{`abs(age) FILTER (WHERE 1) > 0`, `"FILTER" at 9`},
	{`age = 1 ORDER BY 1`, `"ORDER" at 8`},
	{`age = 1) UNION SELECT sql FROM sqlite_master WHERE (1`, `")" at 7`},
	{`age = 1) --`, `")" at 7`},
	{`nocase = 1`, `"nocase" at 0`},
}

func TestCheckAccepts(t *testing.T) {
	for _, p := range accepted {
		if err := subgroup.Check(p, columns); err != nil {
			t.Errorf("Check(%q) = %v, want nil", p, err)
		}
	}
}

func TestCheckRefuses(t *testing.T) {
	for _, r := range refused {
		err := subgroup.Check(r.predicate, columns)
		if err == nil {
			t.Errorf("Check(%.60q) = nil, want a refusal naming %s", r.predicate, r.token)
			continue
		}
		if !errors.Is(err, subgroup.ErrRefused) {
			t.Errorf("Check(%.60q) = %v, which does not wrap ErrRefused", r.predicate, err)
		}
		if !strings.Contains(err.Error(), r.token) {
			t.Errorf("Check(%.60q) = %q, want it to contain %s", r.predicate, err, r.token)
		}
	}
}

// TestCheckMessage pins the shape of a message, which users read.
func TestCheckMessage(t *testing.T) {
	err := subgroup.Check(`age > 1 AND x IN (records)`, columns)
	want := `subgroup: predicate refused: "x" at 12 is not a column of the site's table; its columns are age, sex, site_code, bmi, region, score, name, group`
	if err == nil || err.Error() != want {
		t.Errorf("got  %v\nwant %s", err, want)
	}
	err = subgroup.Check(`random() > 0`, columns)
	if err == nil || !strings.Contains(err.Error(), strings.Join(subgroup.Functions, ", ")) {
		t.Errorf("a refused function should list the allowed ones: %v", err)
	}
	err = subgroup.Check(`group = 1`, columns)
	if err == nil || !strings.Contains(err.Error(), `write it in double quotes: "group"`) {
		t.Errorf("a keyword that names a column should suggest quoting: %v", err)
	}
}

// TestCheckColumnsCase checks that columns match the way SQLite matches
// identifiers: ASCII case is ignored and nothing else is.
func TestCheckColumnsCase(t *testing.T) {
	cols := []string{"Age", "straße", "k"}
	for _, p := range []string{`AGE = 1`, `"age" = 1`, `straße = 'x'`, `STRAßE = 'x'`, `K = 1`} {
		if err := subgroup.Check(p, cols); err != nil {
			t.Errorf("Check(%q) = %v, want nil", p, err)
		}
	}
	// U+212A KELVIN SIGN folds to k in Unicode but not in SQLite.
	for _, p := range []string{"\u212a = 1", `STRASSE = 'x'`, `Straße2 = 'x'`} {
		if err := subgroup.Check(p, cols); err == nil || !errors.Is(err, subgroup.ErrRefused) {
			t.Errorf("Check(%q) = %v, want a refusal", p, err)
		}
	}
	if err := subgroup.Check(`age = 1`, nil); err == nil {
		t.Error("with no columns every name must be refused")
	}
}

func TestCheckDepthLimit(t *testing.T) {
	ok := strings.Repeat("(", 64) + "age" + strings.Repeat(")", 64)
	if err := subgroup.Check(ok, columns); err != nil {
		t.Errorf("64 levels: %v", err)
	}
	long := "age = 1" + strings.Repeat(" ", 4096-7)
	if err := subgroup.Check(long, columns); err != nil {
		t.Errorf("4096 bytes: %v", err)
	}
	if err := subgroup.Check(long+" ", columns); err == nil {
		t.Error("4097 bytes accepted")
	}
}
