"""Reports a person would rather look at: plots (matplotlib, headless) and self-contained HTML pages.

`suite_page.write_suite_report(EVAL_OUT)` draws the eval's page (report.html + PNGs); `run_page.write_run_page(RUN_DIR)`
draws one run's HTML twin of report.md. docs/reports.md says what each plot shows.
"""
