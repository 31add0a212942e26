-- tierlab's reports of a sysbench test: the test's own script (named by TIERLAB_SYSBENCH_TEST), with
-- sysbench's human-readable reports replaced by one JSON object a line, per interval and for the whole
-- window, in counts and seconds.
require(os.getenv("TIERLAB_SYSBENCH_TEST"))

local function report(kind, stat)
   local fields = {
      ("\"kind\": \"%s\""):format(kind),
      ("\"time_total_s\": %.6f"):format(stat.time_total),
      ("\"time_interval_s\": %.6f"):format(stat.time_interval),
      ("\"threads_running\": %d"):format(tonumber(stat.threads_running)),
      ("\"percentile\": %d"):format(sysbench.opt.percentile),
      ("\"latency_pct_ms\": %.6f"):format(stat.latency_pct * 1000),
   }
   for _, name in ipairs({"events", "reads", "writes", "other", "errors", "reconnects"}) do
      fields[#fields + 1] = ("\"%s\": %.0f"):format(name, tonumber(stat[name]))
   end
   if kind == "total" then
      for _, name in ipairs({"latency_min", "latency_avg", "latency_max"}) do
         fields[#fields + 1] = ("\"%s_ms\": %.6f"):format(name, stat[name] * 1000)
      end
   end
   io.write("{" .. table.concat(fields, ", ") .. "}\n")
   io.flush()
end

function sysbench.hooks.report_intermediate(stat) report("interval", stat) end
function sysbench.hooks.report_cumulative(stat) report("total", stat) end
