/* The SQL console's editor: CodeMirror 6 (static/vendor/codemirror/codemirror.min.js, the
   global LakeviewCodeMirror, built by scripts/build_editor.sh) over the form's
   <textarea id="console-sql">, which stays the field the form posts and, without
   JavaScript, the editor itself.

   - SQL highlighting, Spark's words and the materialized-table statements';
   - completion: the statements' keywords where the grammar expects them
     (refresh/core/statements.py), templates of whole statements, and the names of the
     catalog (GET /api/completions/: namespaces, tables, views, materialized tables and
     their columns, only what the user may see);
   - Ctrl-Enter (Cmd-Enter on a Mac) runs the selection, or everything when nothing is
     selected: the form is submitted with that text as its SQL;
   - a failed statement's line and column, as the results below the form give them,
     underlined in the text (positions in the text that ran, moved to where it sits in the
     editor);
   - the text kept in the browser (localStorage, one draft per user) across reloads.

   The textarea keeps the editor's text at all times (hidden, but present for scripts and
   tests that fill it: what is typed into it replaces the editor's text). Others may show a
   failed statement's place with
     document.dispatchEvent(new CustomEvent("lakeview:sql-error",
       {detail: {line: 3, column: 7, message: "..."}}))
   (line and column in the text that last ran) or through window.lakeviewEditor. */
(function () {
  "use strict";

  const CM = window.LakeviewCodeMirror;
  const textarea = document.getElementById("console-sql");
  const script = document.currentScript;
  if (!CM || !textarea || !textarea.form) {
    return;
  }
  const form = textarea.form;
  const namespaceField = document.getElementById("console-namespace");
  const completionsUrl = (script && script.dataset.completionsUrl) || "/api/completions/";
  const userName = ((document.querySelector(".site-header .username") || {}).textContent || "")
    .trim();
  const DRAFT_KEY = "lakeview.console.draft." + userName;
  const RUN_KEY = "lakeview.console.run." + userName;

  // -- the dialect: Spark SQL's words, and the materialized-table statements' -------------

  const SPARK_KEYWORDS =
    "add after all alter analyze and anti any archive array as asc at authorization between " +
    "both bucket buckets by cache cascade case cast catalog catalogs change check clear " +
    "cluster clustered codegen collate collection column columns comment commit compact " +
    "compactions compute concatenate constraint cost create cross cube current current_date " +
    "current_time current_timestamp current_user data database databases day days " +
    "dbproperties default defined delete delimited desc describe dfs directories directory " +
    "distinct distribute div drop else end escape escaped except exchange exists explain " +
    "export extended external extract false fetch fields fileformat first following for " +
    "foreign format formatted from full function functions global grant group grouping " +
    "having hour hours if ignore ilike import in include index indexes inner inpath " +
    "inputformat insert intersect interval into is items join keys last lateral lazy left " +
    "like limit lines list load local location lock locks logical macro map matched merge " +
    "minute minutes month months msck namespace namespaces natural no not null nulls of " +
    "offset on only option options or order out outer outputformat over overlaps overlay " +
    "overwrite partition partitioned partitions percent pivot placing position preceding " +
    "primary principals properties purge qualify query range recordreader recordwriter " +
    "recover reduce references refresh regexp rename repair repeatable replace reset respect " +
    "restrict revoke right rlike role roles rollback rollup row rows schema schemas second " +
    "seconds select semi separated serde serdeproperties session_user set sets show skewed " +
    "some sort sorted start statistics stored stratify struct substr substring sync " +
    "system_time system_version table tables tablesample tblproperties temp temporary " +
    "terminated then time timestamp to touch trailing transaction transactions transform " +
    "trim true truncate try_cast type unarchive unbounded uncache union unique unknown " +
    "unlock unpivot unset update use user using values version view views week weeks when " +
    "where window with within year years zone";
  // FLIP-435's statements, as refresh/core/statements.py reads them, the grant
  // statements' own words (refresh/core/grant_statements.py) and the row filters' and
  // masks' (refresh/core/policy_statements.py).
  const MATERIALIZED_KEYWORDS =
    "materialized freshness refresh_mode suspend resume continuous full job distributed " +
    "hash enforced grants privileges modify browse credential read_metadata read_data " +
    "write_data manage filter mask exempt groups policies";
  const SPARK_TYPES =
    "boolean tinyint byte smallint short int integer bigint long float real double decimal " +
    "dec numeric string char varchar binary date timestamp timestamp_ntz timestamp_ltz " +
    "interval array map struct void";
  const SPARK_FUNCTIONS =
    "abs approx_count_distinct array_contains avg ceil coalesce collect_list collect_set " +
    "concat concat_ws count count_if current_date current_timestamp date_add date_format " +
    "date_sub date_trunc datediff dense_rank explode first floor from_unixtime greatest if " +
    "ifnull lag last lead least length lower max md5 min nullif nvl percentile_approx rank " +
    "regexp_extract regexp_replace round row_number sha2 size split sum to_date " +
    "to_timestamp trim unix_timestamp upper year month dayofmonth hour minute";

  const dialect = CM.SQLDialect.define({
    keywords: SPARK_KEYWORDS + " " + MATERIALIZED_KEYWORDS,
    types: SPARK_TYPES,
    builtin: SPARK_FUNCTIONS,
    identifierQuotes: "`",
    backslashEscapes: true,
    doubleQuotedStrings: true,
    caseInsensitiveIdentifiers: true,
  });

  // -- statements in the text -----------------------------------------------------------

  /* The [start, end) of every statement of `text`: semicolons split it, except inside
     quotes and comments. */
  function statementSpans(text) {
    const spans = [];
    let start = 0;
    let i = 0;
    while (i < text.length) {
      const c = text[i];
      if (c === "'" || c === '"' || c === "`") {
        i += 1;
        while (i < text.length && text[i] !== c) {
          i += c !== "`" && text[i] === "\\" ? 2 : 1;
        }
        i += 1;
      } else if (c === "-" && text[i + 1] === "-") {
        const end = text.indexOf("\n", i);
        i = end < 0 ? text.length : end + 1;
      } else if (c === "/" && text[i + 1] === "*") {
        const end = text.indexOf("*/", i + 2);
        i = end < 0 ? text.length : end + 2;
      } else {
        if (c === ";") {
          spans.push([start, i]);
          start = i + 1;
        }
        i += 1;
      }
    }
    spans.push([start, text.length]);
    return spans;
  }

  function statementAt(state, pos) {
    const text = state.doc.toString();
    const span = statementSpans(text).find(([from, to]) => pos >= from && pos <= to);
    const [from, to] = span || [0, text.length];
    return { from: from, to: to, text: text.slice(from, to) };
  }

  const WORD = "[\\p{L}\\p{N}_$]+";
  const NAME = "(?:`[^`\\n]+`|" + WORD + ")";
  const PATH = NAME + "(?:\\s*\\.\\s*" + NAME + ")*";
  const NOT_ALIAS =
    "WHERE|JOIN|ON|USING|GROUP|ORDER|LIMIT|LEFT|RIGHT|INNER|FULL|CROSS|OUTER|UNION|SET|WHEN|" +
    "HAVING|SEMI|ANTI|NATURAL|LATERAL|WINDOW|FOR|PIVOT|UNPIVOT|VALUES|SELECT|AS|EXCEPT|" +
    "INTERSECT|MINUS|SUSPEND|RESUME|REFRESH|RESET|FRESHNESS|REFRESH_MODE|COMMENT|WITH|" +
    "PARTITIONED|DISTRIBUTED|TABLESAMPLE|QUALIFY|CLUSTER|DISTRIBUTE|SORT";
  const TABLE_REFERENCE = new RegExp(
    "\\b(?:FROM|JOIN|UPDATE|INTO|TABLE)\\s+(" + PATH + ")" +
      "(?:\\s+(?:AS\\s+)?(?!(?:" + NOT_ALIAS + ")\\b)(" + WORD + "))?",
    "giu"
  );

  function unquotedPath(path) {
    return path
      .split(/\s*\.\s*/)
      .map((part) => part.replace(/^`|`$/g, ""))
      .join(".");
  }

  /* The tables and views a statement reads or names, and the aliases it gives them. */
  function tablesOf(statement) {
    const tables = [];
    const aliases = {};
    for (const match of statement.matchAll(TABLE_REFERENCE)) {
      const table = unquotedPath(match[1]);
      if (!tables.includes(table)) {
        tables.push(table);
      }
      if (match[2]) {
        aliases[match[2].toLowerCase()] = table;
      }
    }
    return { tables: tables.slice(0, 10), aliases: aliases };
  }

  // -- completion: the catalog's names ----------------------------------------------------

  const KIND = {
    namespace: { type: "namespace", detail: "namespace", boost: 1 },
    table: { type: "class", detail: "table", boost: 2 },
    view: { type: "interface", detail: "view", boost: 2 },
    materialized_table: { type: "type", detail: "materialized table", boost: 2 },
    column: { type: "property", detail: "", boost: 3 },
  };
  const PLAIN_NAME = /^[A-Za-z_][A-Za-z0-9_]*$/;
  const answers = new Map();

  function quoted(label) {
    return label
      .split(".")
      .map((part) => (PLAIN_NAME.test(part) ? part : "`" + part.replace(/`/g, "``") + "`"))
      .join(".");
  }

  /* GET /api/completions/, each answer kept for the page's life (at most 100). */
  function ask(params) {
    const query = new URLSearchParams();
    query.set("prefix", params.prefix);
    if (params.namespace) {
      query.set("namespace", params.namespace);
    }
    params.tables.forEach((table) => query.append("table", table));
    const url = completionsUrl + "?" + query.toString();
    if (!answers.has(url)) {
      if (answers.size >= 100) {
        answers.delete(answers.keys().next().value);
      }
      const answer = fetch(url, {
        credentials: "same-origin",
        headers: { Accept: "application/json" },
      }).then((response) => (response.ok ? response.json() : { results: [], truncated: true }));
      answer.catch(() => answers.delete(url));
      answers.set(url, answer);
    }
    return answers.get(url);
  }

  function inCommentOrString(state, pos) {
    const node = CM.syntaxTree(state).resolveInner(pos, -1);
    return /Comment|String/.test(node.name);
  }

  const TYPED_PATH = /(?:(?:`[^`\n]*`|[\p{L}\p{N}_$]+)?\.)*(?:`[^`\n]*`?|[\p{L}\p{N}_$]*)$/u;
  const AFTER_TABLE_WORD = /\b(?:FROM|JOIN|UPDATE|INTO|TABLE|DESCRIBE|DESC)\s+[\p{L}\p{N}_$`.]*$/iu;

  async function catalogNames(context) {
    const typed = context.matchBefore(TYPED_PATH);
    if (!typed || (typed.from === typed.to && !context.explicit)) {
      return null;
    }
    if (inCommentOrString(context.state, context.pos)) {
      return null;
    }
    const parts = typed.text.split(".").map((part) => part.replace(/`/g, ""));
    const partial = parts.pop();
    const lastPart = typed.text.slice(typed.text.lastIndexOf(".") + 1);
    const from = context.pos - lastPart.length;
    const statement = statementAt(context.state, context.pos);
    const read = tablesOf(statement.text);
    let qualifier = parts;
    if (qualifier.length === 1 && read.aliases[qualifier[0].toLowerCase()]) {
      qualifier = read.aliases[qualifier[0].toLowerCase()].split(".");
    }
    // A moment's pause: typing on cancels the question before it is asked.
    await new Promise((resolve) => window.setTimeout(resolve, 60));
    if (context.aborted) {
      return null;
    }
    let answer;
    try {
      answer = await ask({
        prefix: qualifier.concat([partial]).join("."),
        namespace: namespaceField ? namespaceField.value : "",
        tables: qualifier.length ? [] : read.tables,
      });
    } catch (error) {
      return null;
    }
    const afterTableWord = AFTER_TABLE_WORD.test(
      context.state.sliceDoc(Math.max(0, context.pos - 300), context.pos)
    );
    const options = answer.results.map((item) => {
      const kind = KIND[item.kind] || KIND.table;
      const label = quoted(item.label);
      const named = item.kind !== "column" && item.kind !== "namespace";
      return {
        label: label,
        type: kind.type,
        detail: item.kind === "column" ? item.type : kind.detail,
        info: item.kind === "namespace" ? undefined : item.qualified,
        boost: kind.boost + (afterTableWord && named ? 5 : 0),
      };
    });
    return {
      from: from,
      options: options,
      // Typing more letters filters these here, unless the answer was cut short.
      validFor: answer.truncated ? undefined : /^[\p{L}\p{N}_$]*$/u,
    };
  }

  // -- completion: the materialized-table statements' keywords ---------------------------

  function keyword(label, boost) {
    return { label: label, type: "keyword", boost: boost === undefined ? 6 : boost };
  }

  function template(text, label, detail) {
    return CM.snippetCompletion(text, {
      label: label,
      detail: detail,
      type: "text",
      boost: 4,
    });
  }

  const STATEMENT_TEMPLATES = [
    template(
      "CREATE MATERIALIZED TABLE ${name}\nFRESHNESS = INTERVAL '${1}' ${HOUR}\nAS SELECT ${}",
      "CREATE MATERIALIZED TABLE",
      "a table kept fresh"
    ),
    template(
      "CREATE OR ALTER MATERIALIZED TABLE ${name}\nFRESHNESS = INTERVAL '${1}' ${HOUR}\nAS SELECT ${}",
      "CREATE OR ALTER MATERIALIZED TABLE",
      "create, or change what differs"
    ),
    template("ALTER MATERIALIZED TABLE ${name} SUSPEND", "ALTER MATERIALIZED TABLE … SUSPEND"),
    template("ALTER MATERIALIZED TABLE ${name} RESUME", "ALTER MATERIALIZED TABLE … RESUME"),
    template("ALTER MATERIALIZED TABLE ${name} REFRESH", "ALTER MATERIALIZED TABLE … REFRESH"),
    template(
      "ALTER MATERIALIZED TABLE ${name} REFRESH PARTITION (${column} = '${value}')",
      "ALTER MATERIALIZED TABLE … REFRESH PARTITION"
    ),
    template(
      "ALTER MATERIALIZED TABLE ${name} SET FRESHNESS = INTERVAL '${1}' ${HOUR}",
      "ALTER MATERIALIZED TABLE … SET FRESHNESS"
    ),
    template(
      "ALTER MATERIALIZED TABLE ${name} SET REFRESH_MODE = ${FULL}",
      "ALTER MATERIALIZED TABLE … SET REFRESH_MODE"
    ),
    template("ALTER MATERIALIZED TABLE ${name} AS\nSELECT ${}", "ALTER MATERIALIZED TABLE … AS"),
    template("DROP MATERIALIZED TABLE ${name}", "DROP MATERIALIZED TABLE"),
    template("DROP MATERIALIZED TABLE IF EXISTS ${name}", "DROP MATERIALIZED TABLE IF EXISTS"),
    template("SHOW MATERIALIZED TABLES", "SHOW MATERIALIZED TABLES"),
    template("SHOW CREATE MATERIALIZED TABLE ${name}", "SHOW CREATE MATERIALIZED TABLE"),
    template("DESCRIBE JOB '${id}'", "DESCRIBE JOB", "a refresh job"),
    template("GRANT ${read_data} ON SCHEMA ${namespace} TO USER ${name}", "GRANT", "a privilege"),
    template(
      "REVOKE ${read_data} ON SCHEMA ${namespace} FROM USER ${name}",
      "REVOKE",
      "a privilege"
    ),
    template("SHOW GRANTS ON SCHEMA ${namespace}", "SHOW GRANTS ON", "who holds what"),
    template("SHOW GRANTS TO USER ${name}", "SHOW GRANTS TO", "what one holds"),
    template(
      "ALTER TABLE ${name} SET ROW FILTER ${condition} EXEMPT GROUPS ${group}",
      "ALTER TABLE … SET ROW FILTER",
      "the rows readers see"
    ),
    template("ALTER TABLE ${name} DROP ROW FILTER", "ALTER TABLE … DROP ROW FILTER"),
    template(
      "ALTER TABLE ${name} ALTER COLUMN ${column} SET MASK ${expression} EXEMPT GROUPS ${group}",
      "ALTER TABLE … SET MASK",
      "what readers see of a column"
    ),
    template("ALTER TABLE ${name} ALTER COLUMN ${column} DROP MASK", "ALTER TABLE … DROP MASK"),
    template("SHOW POLICIES ON ${name}", "SHOW POLICIES ON", "row filter and masks"),
  ];
  // The statements whose first word alone is not the keyword.
  const OPENERS = ["DELETE FROM", "MERGE INTO"].map((word) => keyword(word, 3));

  // What may follow the statement's words so far, FLIP-435's grammar as
  // refresh/core/statements.py reads it; `words` are upper-cased, strings are "'". `only`:
  // nothing else may follow (other keywords are not offered).
  const CREATE_CLAUSES = ["COMMENT", "DISTRIBUTED BY", "PARTITIONED BY", "WITH", "FRESHNESS",
    "REFRESH_MODE", "AS"];
  const ALTER_ACTIONS = ["SUSPEND", "RESUME", "RESUME WITH (", "REFRESH", "REFRESH PARTITION (",
    "SET FRESHNESS = INTERVAL", "SET REFRESH_MODE =", "SET (", "RESET (", "AS"];
  const UNITS = ["SECOND", "MINUTE", "HOUR", "DAY"];
  // GRANT, REVOKE and SHOW GRANTS, as refresh/core/grant_statements.py reads them.
  const PRIVILEGES = ["read_metadata", "read_data", "write_data", "create", "manage", "SELECT",
    "MODIFY", "CREATE TABLE", "CREATE SCHEMA", "USE SCHEMA", "BROWSE", "ALL PRIVILEGES"];
  const SECURABLES = ["CATALOG", "SCHEMA", "NAMESPACE", "TABLE", "VIEW", "MATERIALIZED TABLE"];
  const PRINCIPALS = ["USER", "GROUP", "CREDENTIAL"];
  const MODES = ["FULL", "CONTINUOUS"];
  // Row filters and masks, as refresh/core/policy_statements.py reads them: after
  // ALTER TABLE name (and ALTER MATERIALIZED TABLE name), and after a column.
  const POLICY_ACTIONS = ["SET ROW FILTER", "DROP ROW FILTER", "ALTER COLUMN"];
  const MASK_ACTIONS = ["SET MASK", "DROP MASK"];

  function expected(words) {
    const n = words.length;
    const last = words[n - 1];
    const joined = words.join(" ");
    const only = (labels) => ({ labels: labels, only: true });
    const also = (labels) => ({ labels: labels, only: false });
    if (n === 0) {
      return null;
    }
    if (last === "REFRESH_MODE") {
      return only(MODES.map((mode) => "= " + mode));
    }
    if (last === "=" && words[n - 2] === "REFRESH_MODE") {
      return only(MODES);
    }
    if (last === "FRESHNESS") {
      return only(["= INTERVAL"]);
    }
    if (last === "=" && words[n - 2] === "FRESHNESS") {
      return only(["INTERVAL"]);
    }
    if (last === "'" && words[n - 2] === "INTERVAL") {
      return only(UNITS);
    }
    if (joined === "CREATE") {
      return only(["MATERIALIZED TABLE", "OR ALTER MATERIALIZED TABLE"]);
    }
    if (joined === "CREATE OR") {
      return only(["ALTER MATERIALIZED TABLE"]);
    }
    if (joined === "ALTER") {
      return only(["MATERIALIZED TABLE", "TABLE"]);
    }
    if (joined === "CREATE OR ALTER" || joined === "SHOW CREATE") {
      return only(["MATERIALIZED TABLE"]);
    }
    if (joined === "DROP") {
      return only(["MATERIALIZED TABLE", "MATERIALIZED TABLE IF EXISTS"]);
    }
    if (joined === "SHOW") {
      return also(["MATERIALIZED TABLES", "CREATE MATERIALIZED TABLE", "GRANTS",
        "POLICIES ON"]);
    }
    if (joined === "SHOW POLICIES") {
      return only(["ON"]);
    }
    if (/^ALTER TABLE \S+$/.test(joined)) {
      return only(POLICY_ACTIONS);
    }
    if (/^ALTER TABLE \S+ (?:SET|DROP)$/.test(joined)) {
      return only(["ROW FILTER"]);
    }
    if (/^ALTER (?:MATERIALIZED )?TABLE \S+ (?:ALTER|CHANGE)(?: COLUMN)? \S+$/.test(joined) &&
        last !== "COLUMN") {
      return only(MASK_ACTIONS);
    }
    if (last === "EXEMPT") {
      return only(["GROUPS"]);
    }
    const policy = /^ALTER (?:MATERIALIZED )?TABLE \S+ .*(?:SET ROW FILTER|SET MASK) \S/;
    if (policy.test(joined) && !words.includes("EXEMPT")) {
      return also(["EXEMPT GROUPS"]);
    }
    if (joined === "SHOW GRANTS" || joined === "SHOW GRANT") {
      return only(["ON", "TO"]);
    }
    const granting = /^(GRANT|REVOKE)\b/.exec(joined);
    if (granting || /^SHOW GRANTS?\b/.test(joined)) {
      const verb = granting ? granting[1] : "SHOW";
      if (last === "ON") {
        return only(SECURABLES);
      }
      if (last === "TO" || last === "FROM") {
        return only(PRINCIPALS);
      }
      if (verb !== "SHOW" && !words.includes("ON") && (n === 1 || last === ",")) {
        return only(PRIVILEGES);
      }
      if (verb !== "SHOW" && !words.includes("ON")) {
        return also(["ON"]);
      }
      // After the securable's name (CATALOG has none): who, unless it was said already.
      const on = words.lastIndexOf("ON");
      const named = !["SCHEMA", "NAMESPACE", "TABLE", "VIEW", "MATERIALIZED"].includes(last);
      const said = words.slice(on).some((word) => word === "TO" || word === "FROM");
      if (on >= 0 && n > on + 1 && named && !said) {
        return only([verb === "REVOKE" ? "FROM" : "TO"]);
      }
    }
    if (joined === "SHOW MATERIALIZED TABLES") {
      return only(["IN", "FROM"]);
    }
    if (joined === "DESCRIBE" || joined === "DESC") {
      return also(["JOB"]);
    }
    if (/^ALTER MATERIALIZED TABLE \S+$/.test(joined)) {
      return only(ALTER_ACTIONS.concat(POLICY_ACTIONS));
    }
    if (/^ALTER MATERIALIZED TABLE \S+ SET$/.test(joined)) {
      return only(["FRESHNESS = INTERVAL", "REFRESH_MODE =", "ROW FILTER"]);
    }
    const create = /^CREATE (?:OR ALTER )?MATERIALIZED TABLE \S+/.exec(joined);
    if (create && !words.slice(4).includes("AS")) {
      // The clauses after the last one written, in the one order Flink reads them; types
      // and the like may be typed too (the schema part, the options).
      let next = 0;
      CREATE_CLAUSES.forEach((clause, index) => {
        if (words.includes(clause.split(" ")[0])) {
          next = index + 1;
        }
      });
      const shown = { FRESHNESS: "FRESHNESS = INTERVAL", REFRESH_MODE: "REFRESH_MODE =" };
      return also(CREATE_CLAUSES.slice(next).map((clause) => shown[clause] || clause));
    }
    return null;
  }

  /* The statement's words before the one being typed, upper-cased; a string is "'". */
  function wordsBefore(text) {
    const words = [];
    const pattern = /'(?:[^'\\]|\\.)*'?|"(?:[^"\\]|\\.)*"?|`[^`]*`?|--[^\n]*|\/\*[\s\S]*?(?:\*\/|$)|[\p{L}\p{N}_$.]+|[=(),]/gu;
    for (const match of text.matchAll(pattern)) {
      const token = match[0];
      if (token.startsWith("--") || token.startsWith("/*")) {
        continue;
      }
      words.push(token[0] === "'" || token[0] === '"' ? "'" : token.toUpperCase());
    }
    return words;
  }

  const sqlKeywords = CM.keywordCompletionSource(dialect, true);

  /* Keywords: what the statements' grammar expects here first, with Spark's others unless
     the grammar allows nothing else; templates of whole statements at a statement's start. */
  function keywords(context) {
    const typed = context.matchBefore(/[\p{L}\p{N}_$]*$/u);
    if (!typed || inCommentOrString(context.state, context.pos)) {
      return null;
    }
    if (typed.from === typed.to && !context.explicit) {
      return null;
    }
    const statement = statementAt(context.state, context.pos);
    const words = wordsBefore(context.state.sliceDoc(statement.from, typed.from));
    const next = expected(words);
    let hints = [];
    if (words.length === 0) {
      hints = STATEMENT_TEMPLATES.concat(OPENERS);
    } else if (next) {
      hints = next.labels.map((label) => keyword(label));
    }
    const others = next && next.only ? null : sqlKeywords(context);
    if (!others) {
      return hints.length ? { from: typed.from, options: hints } : null;
    }
    const taken = new Set(hints.map((hint) => hint.label));
    return {
      from: others.from,
      options: hints.concat(others.options.filter((option) => !taken.has(option.label))),
      validFor: hints.length ? undefined : others.validFor,
    };
  }

  // -- errors: a failed statement's line and column, underlined ---------------------------

  /* The text that last ran and where it started in the editor's text, with the edits made
     since (positions in the text that ran are moved through them). */
  let ran = null;

  /* The offset in `text` of a 1-based line and column, the column counted in characters
     as the server counts them (a character outside the BMP is one, not two). */
  function offsetIn(text, line, column) {
    let offset = 0;
    for (let l = 1; l < line; l += 1) {
      const end = text.indexOf("\n", offset);
      if (end < 0) {
        return null;
      }
      offset = end + 1;
    }
    let characters = column - 1;
    while (characters > 0 && offset < text.length && text[offset] !== "\n") {
      const code = text.charCodeAt(offset);
      offset += code >= 0xd800 && code <= 0xdbff ? 2 : 1;
      characters -= 1;
    }
    return offset;
  }

  function underline(errors) {
    if (!ran) {
      return;
    }
    const state = view.state;
    const diagnostics = [];
    for (const error of errors) {
      const at = offsetIn(ran.text, error.line, error.column);
      if (at === null) {
        continue;
      }
      const from = Math.min(ran.changes.mapPos(ran.from + at, 1), state.doc.length);
      const line = state.doc.lineAt(from);
      const rest = line.text.slice(from - line.from);
      const token = /^(?:'(?:[^'\\]|\\.)*'?|`[^`]*`?|[\p{L}\p{N}_$.]+|\S)/u.exec(rest);
      let to = from + (token ? token[0].length : 0);
      let start = from;
      if (to === start && start > line.from) {
        start -= 1; // at the end of a line: the character before it
      }
      to = Math.max(to, start);
      diagnostics.push({
        from: start,
        to: to,
        severity: "error",
        message: "Line " + error.line + ", column " + error.column + ": " + error.message,
      });
    }
    if (!diagnostics.length) {
      return;
    }
    const spec = CM.setDiagnostics(state, diagnostics);
    view.dispatch(spec, {
      effects: CM.EditorView.scrollIntoView(diagnostics[0].from, { y: "center" }),
    });
  }

  const POSITION = /line\s+(\d+),\s*column\s+(\d+)/i;

  /* The failed statements the page shows (the console's results and its plan): the
     error's own position, else where its statement starts. */
  function shownErrors() {
    const errors = [];
    document.querySelectorAll(".statement-result.error").forEach((box) => {
      let line = parseInt(box.dataset.line || "", 10);
      let column = parseInt(box.dataset.column || "", 10);
      if (!(line > 0)) {
        const place = box.querySelector(".error-position") || box.querySelector(".statement-head .muted");
        const found = place && POSITION.exec(place.textContent);
        if (!found) {
          return;
        }
        line = parseInt(found[1], 10);
        column = parseInt(found[2], 10);
      }
      const message = box.querySelector(".result-message");
      errors.push({
        line: line,
        column: column > 0 ? column : 1,
        message: message ? message.textContent.trim() : "This statement failed",
      });
    });
    return errors;
  }

  // -- the draft and the text that ran ------------------------------------------------------

  function stored(storage, key) {
    try {
      return window[storage].getItem(key);
    } catch (error) {
      return null;
    }
  }

  function store(storage, key, value) {
    try {
      if (value === null) {
        window[storage].removeItem(key);
      } else {
        window[storage].setItem(key, value);
      }
    } catch (error) {
      // Storage full or refused (a private window): the text is only not kept.
    }
  }

  /* The page's text: the draft, unless the page answers a run with another text (the
     text that ran is a part of the draft: the draft, the run placed in it). */
  function startingText() {
    const served = textarea.value;
    const draft = stored("localStorage", DRAFT_KEY);
    let run = null;
    try {
      run = JSON.parse(stored("sessionStorage", RUN_KEY) || "null");
    } catch (error) {
      run = null;
    }
    store("sessionStorage", RUN_KEY, null);
    if (
      run && served && run.text === served && draft !== null &&
      draft.slice(run.from, run.from + run.text.length) === run.text
    ) {
      return { doc: draft, ran: { from: run.from, text: served } };
    }
    if (!served.trim() && draft !== null) {
      return { doc: draft, ran: null };
    }
    return { doc: served, ran: served ? { from: 0, text: served } : null };
  }

  let saving = 0;
  function saveDraft() {
    window.clearTimeout(saving);
    saving = 0;
    store("localStorage", DRAFT_KEY, view.state.doc.toString());
  }

  // -- running ---------------------------------------------------------------------------

  let pending = null;

  /* Ctrl/Cmd-Enter: the selection, or everything, submitted as the form's SQL. */
  function runSelection(editorView) {
    const selection = editorView.state.selection.main;
    pending = selection.empty ? null : { from: selection.from, to: selection.to };
    const button = document.getElementById("console-run");
    if (form.requestSubmit) {
      form.requestSubmit(button || undefined);
    } else if (button) {
      button.click();
    } else {
      form.submit();
    }
    return true;
  }

  // Before anyone else hears of the submission: the form posts the text that runs.
  document.addEventListener(
    "submit",
    (event) => {
      if (event.target !== form) {
        return;
      }
      const doc = view.state.doc.toString();
      const range = pending && pending.to <= doc.length ? pending : { from: 0, to: doc.length };
      pending = null;
      const text = doc.slice(range.from, range.to);
      textarea.value = text;
      ran = { from: range.from, text: text, changes: CM.ChangeSet.empty(doc.length) };
      saveDraft();
      store("sessionStorage", RUN_KEY, JSON.stringify({ from: range.from, text: text }));
      // The form's data is read by now; a page that stays (a script submitting it itself)
      // gets the editor's whole text back in the field.
      window.setTimeout(() => {
        textarea.value = view.state.doc.toString();
      }, 0);
    },
    true
  );

  // -- the editor --------------------------------------------------------------------------

  const highlight = CM.HighlightStyle.define([
    { tag: CM.tags.keyword, color: "#1769aa", fontWeight: "600" },
    { tag: [CM.tags.typeName, CM.tags.standard(CM.tags.name)], color: "#7a3e9d" },
    { tag: [CM.tags.string, CM.tags.special(CM.tags.name)], color: "#17663a" },
    { tag: [CM.tags.number, CM.tags.bool, CM.tags.null], color: "#a4540b" },
    { tag: [CM.tags.lineComment, CM.tags.blockComment], color: "#66768a", fontStyle: "italic" },
    { tag: CM.tags.special(CM.tags.string), color: "#1f2933" },
    { tag: [CM.tags.operator, CM.tags.punctuation, CM.tags.bracket], color: "#44546a" },
  ]);

  const theme = CM.EditorView.theme({
    "&": {
      border: "1px solid var(--border)",
      borderRadius: "4px",
      background: "#fff",
      fontSize: "13px",
    },
    "&.cm-focused": { outline: "2px solid #9cc6ea", borderColor: "var(--accent)" },
    ".cm-scroller": {
      fontFamily: "var(--mono)",
      lineHeight: "1.5",
      minHeight: "12rem",
      maxHeight: "70vh",
      overflow: "auto",
    },
    ".cm-content": { padding: ".35rem 0" },
    ".cm-gutters": {
      background: "#f7f9fb",
      color: "var(--muted)",
      borderRight: "1px solid var(--border)",
    },
    ".cm-activeLine": { background: "#f3f7fb" },
    ".cm-activeLineGutter": { background: "#e8eef5" },
    ".cm-tooltip": { fontSize: "13px" },
    ".cm-tooltip-autocomplete ul li[aria-selected]": { background: "var(--accent)" },
    ".cm-completionDetail": { color: "var(--muted)", fontStyle: "normal", marginLeft: ".6em" },
    ".cm-lintRange-error": {
      backgroundImage: "none",
      textDecoration: "underline wavy var(--danger)",
      textDecorationSkipInk: "none",
      textUnderlineOffset: "3px",
      background: "var(--error-bg)",
    },
    ".cm-diagnostic-error": { borderLeftColor: "var(--danger)" },
  });

  const label = document.querySelector('label[for="console-sql"]');
  const start = startingText();
  const view = new CM.EditorView({
    state: CM.EditorState.create({
      doc: start.doc,
      extensions: [
        CM.Prec.highest(CM.keymap.of([{ key: "Mod-Enter", run: runSelection }])),
        CM.lineNumbers(),
        CM.highlightActiveLineGutter(),
        CM.highlightSpecialChars(),
        CM.history(),
        CM.drawSelection(),
        CM.indentOnInput(),
        CM.bracketMatching(),
        CM.closeBrackets(),
        CM.highlightActiveLine(),
        CM.sql({ dialect: dialect, upperCaseKeywords: true }),
        CM.syntaxHighlighting(highlight),
        CM.autocompletion({
          override: [keywords, catalogNames],
          icons: true,
          maxRenderedOptions: 60,
        }),
        CM.keymap.of([
          ...CM.closeBracketsKeymap,
          ...CM.defaultKeymap,
          ...CM.historyKeymap,
          ...CM.completionKeymap,
          CM.indentWithTab,
        ]),
        CM.placeholder("SHOW MATERIALIZED TABLES"),
        CM.EditorView.contentAttributes.of({
          "aria-label": label ? label.textContent.trim() : "SQL",
          spellcheck: "false",
          autocorrect: "off",
          autocapitalize: "off",
        }),
        CM.EditorView.lineWrapping,
        theme,
        CM.EditorView.updateListener.of((update) => {
          if (!update.docChanged) {
            return;
          }
          if (ran) {
            ran.changes = ran.changes.compose(update.changes);
          }
          textarea.value = update.state.doc.toString();
          window.clearTimeout(saving);
          saving = window.setTimeout(saveDraft, 300);
        }),
      ],
    }),
  });
  if (start.ran) {
    ran = {
      from: start.ran.from,
      text: start.ran.text,
      changes: CM.ChangeSet.empty(view.state.doc.length),
    };
  }

  // The editor takes the textarea's place; the textarea keeps its value and its id, out
  // of sight and of the tab order.
  const holder = document.createElement("div");
  holder.className = "sql-editor";
  holder.id = "console-editor";
  textarea.parentNode.insertBefore(holder, textarea);
  holder.appendChild(view.dom);
  textarea.value = view.state.doc.toString();
  textarea.tabIndex = -1;
  textarea.setAttribute("aria-hidden", "true");
  Object.assign(textarea.style, {
    position: "absolute",
    width: "1px",
    height: "1px",
    minHeight: "0",
    padding: "0",
    border: "0",
    opacity: "0",
    pointerEvents: "none",
  });
  textarea.parentNode.style.position = "relative";
  textarea.addEventListener("input", () => {
    const text = textarea.value;
    if (text !== view.state.doc.toString()) {
      view.dispatch({ changes: { from: 0, to: view.state.doc.length, insert: text } });
    }
  });
  if (label) {
    label.addEventListener("click", (event) => {
      event.preventDefault();
      view.focus();
    });
  }
  const hint = document.createElement("p");
  hint.className = "help";
  hint.id = "console-editor-keys";
  const mac = /Mac|iPhone|iPad/.test(navigator.platform || navigator.userAgent);
  hint.textContent = (mac ? "⌘-Enter" : "Ctrl-Enter") + " runs the selection, or everything; " +
    "Ctrl-Space completes names and keywords.";
  holder.insertAdjacentElement("afterend", hint);

  window.addEventListener("pagehide", saveDraft);

  // Failed statements: those of the page, and those that appear later (a job's results
  // filled in by static/js/jobs.js).
  let lastShown = "";
  function showErrors() {
    const errors = shownErrors();
    const key = JSON.stringify(errors);
    if (key !== lastShown) {
      lastShown = key;
      underline(errors);
    }
  }
  showErrors();
  const main = document.querySelector("main");
  if (main && window.MutationObserver) {
    let queued = false;
    new MutationObserver(() => {
      if (!queued) {
        queued = true;
        window.requestAnimationFrame(() => {
          queued = false;
          showErrors();
        });
      }
    }).observe(main, { childList: true, subtree: true });
  }
  document.addEventListener("lakeview:sql-error", (event) => {
    const detail = event.detail || {};
    underline([{ line: detail.line, column: detail.column || 1, message: detail.message || "" }]);
  });

  window.lakeviewEditor = {
    view: view,
    text: () => view.state.doc.toString(),
    run: () => runSelection(view),
    underline: underline,
  };
})();
