// The dashboard's entry point: routes the URL fragment (#/overview, #/jobs, #/jobs/<id>,
// #/taskmanagers, #/taskmanagers/<id>, #/jobmanager) to a page, refreshes that page every few
// seconds, and asks for the REST token when the JobManager answers 401.

import * as api from "./api.js";
import { jobPage } from "./job.js";
import { jobManagerPage } from "./jobmanager.js";
import { jobsPage } from "./jobs.js";
import { overviewPage } from "./overview.js";
import { taskManagerPage, taskManagersPage } from "./taskmanagers.js";

const REFRESH_MS = 2500;

const ROUTES = [
  [/^\/overview$/, overviewPage, "overview"],
  [/^\/jobs$/, jobsPage, "jobs"],
  [/^\/jobs\/([0-9a-fA-F]{32})$/, jobPage, "jobs"],
  [/^\/taskmanagers$/, taskManagersPage, "taskmanagers"],
  [/^\/taskmanagers\/(.+)$/, taskManagerPage, "taskmanagers"],
  [/^\/jobmanager$/, jobManagerPage, "jobmanager"],
];

const main = document.getElementById("main");
const banner = document.getElementById("banner");
const live = document.getElementById("live");
const login = document.getElementById("login");
const loginForm = document.getElementById("login-form");
const loginToken = document.getElementById("login-token");
const loginError = document.getElementById("login-error");
const forget = document.getElementById("forget-token");

let page = null;
let timer = null;
let refreshing = null; // the refresh in flight: never two at once
let again = false; // a refresh was asked for while one ran

const app = {
  // Refresh now (after a state change or a click) instead of at the next tick.
  refreshNow() {
    if (refreshing) again = true;
    else schedule(0);
  },
};

function showBanner(text) {
  banner.textContent = text || "";
  banner.hidden = !text;
}

function askForToken(wrong) {
  loginError.hidden = !wrong;
  loginError.textContent = wrong ? "The JobManager refused this token." : "";
  if (!login.open) {
    login.returnValue = "";
    login.showModal();
    loginToken.focus();
  }
}

async function refresh() {
  if (!page) return;
  try {
    await page.refresh();
    showBanner("");
    live.classList.remove("stale");
  } catch (error) {
    live.classList.add("stale");
    if (error.status === 401) {
      showBanner("Authentication required.");
      askForToken(Boolean(api.token()));
    } else {
      showBanner(error.message);
    }
  }
}

function schedule(delay) {
  clearTimeout(timer);
  timer = setTimeout(async () => {
    refreshing = refresh();
    await refreshing;
    refreshing = null;
    // Paused while the login prompt is open: every call would be another 401.
    if (login.open) return;
    schedule(again ? 0 : REFRESH_MS);
    again = false;
  }, delay);
}

function route() {
  if (page && page.dispose) page.dispose();
  page = null;
  const path = location.hash.replace(/^#/, "") || "/overview";
  for (const [pattern, create, nav] of ROUTES) {
    const match = pattern.exec(path);
    if (!match) continue;
    for (const link of document.querySelectorAll("[data-nav]")) link.classList.toggle("active", link.dataset.nav === nav);
    main.replaceChildren();
    page = create(main, ...match.slice(1), app);
    schedule(0);
    return;
  }
  location.replace("#/overview");
}

loginForm.addEventListener("submit", (event) => {
  event.preventDefault();
  api.setToken(loginToken.value.trim());
  loginToken.value = "";
  login.close("signed-in");
  forget.hidden = false;
  route(); // start the page over: its first answers were refusals
});

// Closed without a token (Escape): try again later, which asks again if still refused.
login.addEventListener("close", () => {
  if (login.returnValue !== "signed-in") schedule(REFRESH_MS);
});

forget.addEventListener("click", () => {
  api.setToken(null);
  forget.hidden = true;
  route();
});

api.takeTokenFromFragment();
forget.hidden = !api.token();
window.addEventListener("hashchange", route);
route();
