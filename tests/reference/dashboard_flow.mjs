// The dashboard in a real browser (Debian's chromium, driven by
// puppeteer-core), as a user meets it on a running `burst serve`: the key
// asked for once, a wrong key refused, a job watched while it trains until
// it succeeds, its sweep, the worker pool and the cost. Every page is
// screenshotted into OUT_DIR.
// Usage: node dashboard_flow.mjs URL KEY JOB_ID SWEEP_ID OUT_DIR
// Prints one JSON object with what the pages showed (tests/e2e/
// dashboard_test.cpp compares it with the API); exits non-zero when a page
// did not do what it should (the message says which and what it showed).
import fs from "node:fs";
import path from "node:path";
import puppeteer from "puppeteer-core";

const [url, key, jobId, sweepId, outDir] = process.argv.slice(2);
fs.mkdirSync(outDir, {recursive: true});
const out = {console: [], polls: []};

const browser = await puppeteer.launch({
  executablePath: process.env.BURST_CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"],
});
const sleep = (ms) => new Promise((r) => setTimeout(r, ms));
// Clicks a link of a table that the page redraws every poll: found and
// clicked in one step in the page (puppeteer's click finds the element,
// then clicks where it was, and a redraw between the two detaches it).
const clickLink = (page, sel) => page.$eval(sel, (a) => a.click());
try {
  const page = await browser.newPage();
  await page.setViewport({width: 1280, height: 900});
  // Any script error, CSP refusal or failed load is a finding.
  page.on("console", (m) => { if (m.type() === "error" || m.type() === "warning") out.console.push(m.text()); });
  page.on("pageerror", (e) => out.console.push("pageerror: " + e.message));
  page.on("requestfailed", (r) => out.console.push("failed: " + r.url() + " " + (r.failure() || {}).errorText));

  const base = url + "/?poll=300";
  const text = (sel) => page.$eval(sel, (e) => e.textContent.trim());
  const main = () => page.$eval("#main", (e) => e.innerText.slice(0, 800));
  const shot = (name) => page.screenshot({path: path.join(outDir, name + ".png"), fullPage: true});
  // Waits for fn (run in the page) to be truthy; on timeout, says what the page showed.
  async function until(what, fn, arg, timeoutMs = 60_000) {
    try {
      return await page.waitForFunction(fn, {timeout: timeoutMs, polling: 100}, arg);
    } catch (e) {
      throw new Error(`${what}: not seen in ${timeoutMs} ms; the page showed:\n${await main()}`);
    }
  }
  // A view has refreshed from the API at least once since `since`.
  const loadedAfter = (since) => until("the view loading", (t) => Number(document.querySelector("#main").dataset.loaded || 0) > t, since);

  // 1. No key yet: the page asks for one and shows nothing else.
  await page.goto(base);
  await until("the key form", () => document.querySelector("#key-form"));
  out.asked_for_key = true;
  await shot("sign-in");
  // A wrong key is refused, and the form says so (the browser logs the 401s
  // this asks for; those alone are expected).
  const before = out.console.length;
  await page.type("#key-input", "burst-not-a-key");
  await page.click("#key-form button");
  await until("a refused key", () => /refused/.test(document.querySelector("#main").innerText));
  out.wrong_key_refused = true;
  await sleep(300);  // the other requests of that view, answered 401 too
  out.console = out.console.slice(0, before).concat(out.console.slice(before).filter((m) => !/status of 401/.test(m)));
  // The right one, entered once.
  await page.type("#key-input", key);
  await page.click("#key-form button");
  await until("the jobs table", (id) => document.querySelector("#jobs-table") &&
      document.querySelector("#jobs-table").innerText.includes(id), jobId);
  out.jobs_listed = await page.$$eval("#jobs-table tbody tr", (rows) => rows.length);
  await shot("jobs");

  // 2. The job, watched as it trains: the chart grows while it runs.
  await clickLink(page, `#jobs-table a[href="#/jobs/${jobId}"]`);
  await until("the loss chart", () => Number((document.querySelector("#chart-loss") || {dataset: {}}).dataset.points) > 0);
  const deadline = Date.now() + 240_000;
  let status = "";
  for (;;) {
    status = await text("#job-status");
    const points = await page.$eval("#chart-loss", (e) => Number(e.dataset.points));
    const step = await text("#job-step");
    const last = out.polls[out.polls.length - 1];
    if (!last || last.points !== points || last.status !== status) out.polls.push({status, step, points});
    if (status === "running" && !out.running_shot) { await shot("job-running"); out.running_shot = true; }
    if (["succeeded", "failed", "cancelled"].includes(status)) break;
    if (Date.now() > deadline) throw new Error(`job ${jobId} still ${status} in the page after 240 s`);
    await sleep(250);
  }
  // The view stops polling a finished job; one more load has the last figures.
  await page.reload();
  await until("the finished job", () => document.querySelector("#job-status") &&
      /succeeded|failed|cancelled/.test(document.querySelector("#job-status").textContent) &&
      Number((document.querySelector("#chart-loss") || {dataset: {}}).dataset.points) > 0);
  await until("the checkpoints table", () => document.querySelector("#checkpoints-table"));
  out.job = {
    status: await text("#job-status"),
    step: await text("#job-step"),
    train_loss: await text("#job-train-loss"),
    valid_loss: await text("#job-valid-loss"),
    baseline: await text("#job-baseline"),
    cost: await text("#job-cost"),
    checkpoints: await page.$$eval("#checkpoints-table tbody tr", (rows) => rows.map((r) => r.cells[0].textContent)),
    chart_points: await page.$eval("#chart-loss", (e) => Number(e.dataset.points)),
    chart_series: await page.$eval("#chart-loss", (e) => Number(e.dataset.series)),
    // Pixels drawn in each series' colour: a chart with axes only has none.
    ink_train: await page.evaluate(() => chartInk(document.querySelector("#chart-loss"), Palette[0])),
    ink_valid: await page.evaluate(() => chartInk(document.querySelector("#chart-loss"), Palette[1])),
    ink_base: await page.evaluate(() => chartInk(document.querySelector("#chart-loss"), "#6b7280")),
    log_lines: await page.$eval("#job-logs", (e) => e.textContent.split("\n").filter(Boolean).length),
  };
  await shot("job");

  // 3. The sweep: each run's curve on one chart.
  await page.goto(base + "#/sweeps");
  await until("the sweeps table", (id) => document.querySelector("#sweeps-table") &&
      document.querySelector("#sweeps-table").innerText.includes(id), sweepId);
  await clickLink(page, `#sweeps-table a[href="#/sweeps/${sweepId}"]`);
  await until("the sweep's runs, succeeded", () => {
    const t = document.querySelector("#sweep-runs-table");
    return t && t.tBodies[0].rows.length === 2 && [...t.tBodies[0].rows].every((r) => r.innerText.includes("succeeded")) &&
        Number(document.querySelector("#chart-sweep").dataset.points) > 0;
  }, undefined, 180_000);
  await loadedAfter(Date.now());  // the chart drawn after the last run's metrics arrived
  out.sweep = {
    status: await text("#sweep-status"),
    runs: await page.$$eval("#sweep-runs-table tbody tr", (rows) => rows.map((r) => r.cells[1].textContent)),
    chart_series: await page.$eval("#chart-sweep", (e) => Number(e.dataset.series)),
    chart_points: await page.$eval("#chart-sweep", (e) => Number(e.dataset.points)),
    ink: await page.evaluate(() => [0, 1].map((i) => chartInk(document.querySelector("#chart-sweep"), Palette[i]))),
    cost: await text("#sweep-cost"),
  };
  await shot("sweep");

  // 4. The pool over time, and 5. the cost.
  await page.goto(base + "#/workers");
  await until("the pool chart", () => Number((document.querySelector("#chart-pool") || {dataset: {}}).dataset.points) > 0);
  out.workers = {
    live: await text("#pool-live"),
    chart_points: await page.$eval("#chart-pool", (e) => Number(e.dataset.points)),
    ink: await page.evaluate(() => chartInk(document.querySelector("#chart-pool"), Palette[0])),
  };
  await shot("workers");
  await page.goto(base + "#/cost");
  await until("the cost runs", () => document.querySelector("#cost-runs-table"));
  out.cost = {
    total: await text("#cost-total"),
    runs: await page.$$eval("#cost-runs-table tbody tr", (rows) => rows.map((r) => r.cells[0].textContent)),
    ink: await page.evaluate(() => chartInk(document.querySelector("#chart-cost"), Palette[0])),
  };
  await shot("cost");
  for (const view of ["deployments", "loops"]) {
    await page.goto(base + "#/" + view);
    await loadedAfter(0);
    await shot(view);
  }

  // 6. Forgetting the key brings the form back.
  await page.click("#signout");
  await until("the key form after signing out", () => document.querySelector("#key-form"));
  out.signed_out = await page.evaluate(() => localStorage.getItem("burst.apiKey") === null);
} finally {
  await browser.close();
}
console.log(JSON.stringify(out));
