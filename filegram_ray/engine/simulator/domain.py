"""What a simulated analyst, lawyer or team lead knows without reading it: the subject matter of the tasks that start
from an empty workspace or ask for new material (T-03 knowledge base, T-10 technical analysis and discounted cash
flow, T-20 weekly reporting, T-19 plain-language explanations of legal terms). Written for this project (textbook
facts in our own words), in English and Chinese; each entry is a list of ``(heading, lines)`` so that a writer can
stop where its B band ends.
"""

from __future__ import annotations

#: T-03 knowledge base: topic -> (English entry, Chinese entry).
KB: dict[str, tuple[list[tuple[str, list[str]]], list[tuple[str, list[str]]]]] = {
    "framework": ([
        ("Purpose", ["Fundamental analysis asks what a business is worth from what it earns, owns and owes, "
                     "and compares that value with the price the market asks."]),
        ("Step 1: the business", ["- How the company makes money: products, customers, pricing power.",
                                  "- Where revenue comes from by segment and region, and how concentrated it is."]),
        ("Step 2: the industry", ["- Market size and growth, the company's share and its trend.",
                                  "- Barriers to entry, substitutes, supplier and buyer power."]),
        ("Step 3: the statements", ["- Income statement: revenue growth, gross and operating margin.",
                                    "- Balance sheet: leverage, liquidity, working capital.",
                                    "- Cash flow statement: operating cash flow against net income, capex, "
                                    "free cash flow."]),
        ("Step 4: valuation", ["- Relative: P/E, P/B and EV/EBITDA against peers and the company's history.",
                               "- Absolute: a discounted cash flow model with explicit assumptions."]),
        ("Step 5: risks and the thesis", ["- Write the thesis in two sentences and list what would prove it "
                                          "wrong.", "- Track the few indicators that matter each quarter."]),
    ], [
        ("目的", ["基本面分析从企业的盈利、资产和负债出发估算其内在价值，再与市场价格比较。"]),
        ("第一步：商业模式", ["- 公司靠什么赚钱：产品、客户、定价能力。", "- 收入按业务和地区的构成，以及集中程度。"]),
        ("第二步：行业", ["- 市场规模与增速，公司份额及其变化。", "- 进入壁垒、替代品、供应商和买方的议价能力。"]),
        ("第三步：三张报表", ["- 利润表：收入增长、毛利率和营业利润率。", "- 资产负债表：杠杆、流动性、营运资本。",
                           "- 现金流量表：经营现金流与净利润的对比、资本开支、自由现金流。"]),
        ("第四步：估值", ["- 相对估值：市盈率、市净率、EV/EBITDA，与同行和历史比较。", "- 绝对估值：假设明确的现金流折现模型。"]),
        ("第五步：风险与投资逻辑", ["- 用两句话写清投资逻辑，并列出会证伪它的情形。", "- 每季度跟踪少数关键指标。"]),
    ]),
    "ratios": ([
        ("P/E (price to earnings)", ["- Share price divided by earnings per share.",
                                     "- Read it against growth: a high P/E needs high, durable growth."]),
        ("P/B (price to book)", ["- Share price divided by book value per share.",
                                 "- Most useful for banks and asset-heavy firms; below 1 can signal distress or "
                                 "value."]),
        ("ROE (return on equity)", ["- Net income divided by average shareholders' equity.",
                                    "- Split it with DuPont: margin × asset turnover × leverage."]),
        ("ROA (return on assets)", ["- Net income divided by average total assets; compares firms with different "
                                    "leverage."]),
        ("Gross and operating margin", ["- Gross profit or operating profit divided by revenue; trends matter "
                                        "more than levels."]),
        ("Debt to equity", ["- Total debt divided by equity; check it against covenants and interest cover."]),
        ("EV/EBITDA", ["- Enterprise value divided by EBITDA; neutral to capital structure, handy across peers."]),
        ("Current ratio", ["- Current assets divided by current liabilities; below 1 calls for a look at cash "
                           "needs."]),
    ], [
        ("市盈率（P/E）", ["- 股价除以每股收益。", "- 要结合增长来看：高市盈率需要高而持久的增长支撑。"]),
        ("市净率（P/B）", ["- 股价除以每股净资产。", "- 适用于银行和重资产企业；低于1可能意味着困境或低估。"]),
        ("净资产收益率（ROE）", ["- 净利润除以平均股东权益。", "- 用杜邦分析拆分：利润率 × 资产周转率 × 杠杆。"]),
        ("总资产收益率（ROA）", ["- 净利润除以平均总资产，可比较杠杆不同的公司。"]),
        ("毛利率与营业利润率", ["- 毛利或营业利润除以收入；趋势比水平更重要。"]),
        ("债务权益比", ["- 总债务除以股东权益；结合贷款契约和利息保障倍数判断。"]),
        ("EV/EBITDA", ["- 企业价值除以EBITDA；不受资本结构影响，便于同行比较。"]),
        ("流动比率", ["- 流动资产除以流动负债；低于1时要关注现金需求。"]),
    ]),
    "industry": ([
        ("Market", ["- Size today and in five years; the growth rate and what drives it."]),
        ("Value chain", ["- Who supplies whom, where the margins sit, which link is the bottleneck."]),
        ("Competition", ["- The main players and their shares; how concentrated the market is.",
                         "- Five forces: rivalry, entrants, substitutes, suppliers, buyers."]),
        ("Regulation and policy", ["- Licences, export controls, subsidies and what could change."]),
        ("Key metrics", ["- The three or four numbers the industry is judged on (utilisation, pricing, "
                         "churn, backlog)."]),
        ("Conclusion", ["- Attractive or not, and which company is best placed, with the reason."]),
    ], [
        ("市场", ["- 当前规模与五年后规模；增速及其驱动因素。"]),
        ("产业链", ["- 上下游关系、利润分布、瓶颈环节。"]),
        ("竞争格局", ["- 主要参与者及份额；市场集中度。", "- 五力：现有竞争、新进入者、替代品、供应商、买方。"]),
        ("监管与政策", ["- 牌照、出口管制、补贴，以及可能的变化。"]),
        ("关键指标", ["- 行业最看重的三四个数字（产能利用率、价格、流失率、订单积压）。"]),
        ("结论", ["- 行业是否有吸引力，哪家公司最有优势，理由是什么。"]),
    ]),
}

#: T-10 additions: the technical analysis module and the DCF explanation.
TECHNICAL: tuple[list[tuple[str, list[str]]], list[tuple[str, list[str]]]] = ([
    ("What technical analysis is", ["Technical analysis reads price and volume history for trend and momentum; "
                                    "it complements, and never replaces, the fundamental view."]),
    ("Moving averages", ["- Simple moving average (SMA): the mean closing price over N days (20, 50, 200).",
                         "- Exponential moving average (EMA): weights recent days more, so it turns sooner.",
                         "- A 50-day average crossing above the 200-day one is read as a trend turning up."]),
    ("RSI (relative strength index)", ["- Compares average gains with average losses over 14 periods, on a "
                                       "0–100 scale.", "- Above 70 is usually called overbought, below 30 "
                                       "oversold."]),
    ("MACD", ["- The 12-day EMA minus the 26-day EMA, with a 9-day EMA of that line as the signal line.",
              "- The MACD line crossing its signal line marks a change in momentum."]),
    ("Volume and levels", ["- Moves on rising volume carry more weight.",
                           "- Support and resistance are price zones where buying or selling held before."]),
    ("Limits", ["- Signals fail often in sideways markets; use them for timing, not for the thesis."]),
], [
    ("技术分析是什么", ["技术分析通过价格和成交量的历史判断趋势与动量，是基本面判断的补充而非替代。"]),
    ("移动平均线", ["- 简单移动平均（SMA）：N日收盘价的平均值（20、50、200日）。", "- 指数移动平均（EMA）：近期权重更高，转向更快。",
                   "- 50日均线上穿200日均线通常被视为趋势转强。"]),
    ("RSI（相对强弱指数）", ["- 比较14个周期内的平均涨幅与平均跌幅，取值0–100。", "- 高于70通常视为超买，低于30视为超卖。"]),
    ("MACD", ["- 12日EMA减去26日EMA，再取其9日EMA作为信号线。", "- MACD线与信号线交叉表示动量变化。"]),
    ("成交量与支撑阻力", ["- 放量的走势更有说服力。", "- 支撑位和阻力位是过去买卖力量曾经守住的价格区间。"]),
    ("局限", ["- 震荡市中信号常常失效；用于择时，而不是决定投资逻辑。"]),
])

DCF: tuple[list[tuple[str, list[str]]], list[tuple[str, list[str]]]] = ([
    ("Discounted cash flow (DCF) model", ["A DCF values a company as the present value of the free cash flow it "
                                         "will generate."]),
    ("Steps", ["1. Project free cash flow (operating cash flow minus capex) for five to ten years.",
               "2. Discount each year at the weighted average cost of capital (WACC).",
               "3. Add a terminal value, usually FCF × (1 + g) / (WACC − g) with a long-run growth g.",
               "4. Sum the present values for enterprise value; subtract net debt for equity value.",
               "5. Divide by shares outstanding and compare with the share price."]),
    ("Checks", ["- Test the result against changes of WACC and g: a small change moves the terminal value a lot.",
                "- Cross-check with the multiples in the valuation ratios note."]),
], [
    ("现金流折现（DCF）模型", ["DCF把公司价值看作其未来自由现金流的现值之和。"]),
    ("步骤", ["1. 预测未来五到十年的自由现金流（经营现金流减资本开支）。", "2. 用加权平均资本成本（WACC）逐年折现。",
              "3. 加上终值，通常为 FCF × (1 + g) / (WACC − g)，g 为长期增长率。", "4. 现值加总得到企业价值，减去净债务得到股权价值。",
              "5. 除以总股本，与股价比较。"]),
    ("检验", ["- 测试WACC和g变化的影响：小幅变动会大幅改变终值。", "- 与估值比率笔记中的倍数互相验证。"]),
])

#: T-20 weekly report: the template's parts and the vocabulary of the invented example weeks.
WEEKLY_PARTS = {"en": ["Done this week", "Planned for next week", "Problems and risks", "Help needed", "Metrics"],
                "zh": ["本周完成", "下周计划", "问题与风险", "需要的支持", "数据指标"]}
TEAM = ["Alex Moreno", "Priya Nair", "Tom Becker", "Mei Lin", "Jonas Weber", "Sara Costa", "Liam Park",
        "Nina Rossi"]
WORK = {"en": ["finished the onboarding flow review", "fixed the export timeout in the reporting service",
               "ran the customer interviews for the pricing page", "drafted the Q3 capacity plan",
               "migrated the nightly jobs to the new scheduler", "closed 14 support tickets",
               "prepared the vendor comparison for the data platform", "wrote the test plan for release 2.4"],
        "zh": ["完成新用户引导流程评审", "修复报表服务导出超时", "完成定价页客户访谈", "起草第三季度产能计划", "把夜间任务迁到新调度器",
               "关闭14个客服工单", "准备数据平台供应商对比", "编写2.4版本测试计划"]}
RISKS = {"en": ["the vendor contract is still unsigned", "one open position on the platform team",
                "test environment is down two days a week", "scope of release 2.4 keeps growing"],
         "zh": ["供应商合同尚未签署", "平台组还有一个岗位空缺", "测试环境每周有两天不可用", "2.4版本范围持续扩大"]}

#: T-19 plain-language explanations of legal terms (key of a statement -> what to say instead).
LAY = {
    "instructed": ("you asked the firm to act for you on {d1}; your next court date is {d2}",
                   "您在{d1}委托了律所；下一次开庭是{d2}"),
    "affidavit": ("a written statement, sworn to be true, has to reach the court and the other side by {d}",
                  "一份经宣誓保证属实的书面陈述，须在{d}前交给法院和对方"),
    "attend": ("{who} will go to the short planning hearing at {court} for you",
               "{who}会代您出席{court}的程序性聆讯"),
    "section": ("section {n} of the law says the court must put the child's interests first",
                "法律第{n}条规定，法院必须把孩子的利益放在第一位"),
    "disclosure": ("the prosecution sent more evidence on {d}; the firm will read it before the next short hearing",
                   "控方在{d}又提交了证据，律所会在下次简短聆讯前看完"),
    "legal_aid": ("legal aid pays for the case; the contribution asked is {amt}", "法律援助承担费用，需自付{amt}"),
    "bail": ("while on bail the person must check in at the police station {freq}", "取保期间需{freq}到警局报到"),
    "mediation": ("a meeting to try to agree without a trial is set for {d}; {who} prepares the options",
                  "{d}安排调解，尝试不经审判达成一致，{who}准备方案"),
    "stage": ("the case is between the first steps and the trial, waiting for expert reports",
              "案件处于开庭前的中间阶段，正在等专家报告"),
    "event": ("{what}: {d} at {time}, {where}", "{what}：{d} {time}，地点{where}"),
    "email": ("{from} wrote on {d} about “{topic}”", "{from}在{d}来信谈“{topic}”"),
}


#: T-03 elaboration: the questions a thorough analyst adds to each part (how much is added follows B).
CHECKS = {
    "framework": (["- Check: does operating cash flow track net income over three years?",
                   "- Check: how much of revenue comes from the top five customers?",
                   "- Check: is the margin trend driven by price, mix or cost?",
                   "- Check: what would a 10 % fall in volume do to operating profit?",
                   "- Check: which management promises from last year were kept?",
                   "- Check: are receivables growing faster than sales?"],
                  ["- 检查：三年来经营现金流是否与净利润同步？", "- 检查：前五大客户占收入多少？", "- 检查：利润率变化来自价格、结构还是成本？",
                   "- 检查：销量下降10%对营业利润有何影响？", "- 检查：管理层去年的承诺兑现了多少？", "- 检查：应收账款是否比收入增长更快？"]),
    "industry": (["- Fill in: the five largest players and their market shares.",
                  "- Fill in: the growth rate of the last five years and the forecast.",
                  "- Fill in: the main cost items and how they have moved.",
                  "- Fill in: the regulations that could change the economics.",
                  "- Fill in: one sentence on who captures the value in the chain.",
                  "- Fill in: the leading indicators to watch each month."],
                 ["- 填写：前五大企业及其市场份额。", "- 填写：过去五年增速及预测。", "- 填写：主要成本项目及其变化。", "- 填写：可能改变行业经济性的监管。",
                  "- 填写：一句话说明价值被产业链哪一环获得。", "- 填写：每月要看的领先指标。"]),
}


def ratio_examples(rng, zh: bool, n: int) -> list[str]:
    """``n`` worked examples of the ratios with drawn numbers (the arithmetic is done here, so each is right)."""
    out = []
    for _ in range(n):
        kind = rng.choice(("pe", "pb", "roe", "de"))
        if kind == "pe":
            price, eps = rng.randint(20, 180), round(rng.uniform(1.0, 9.0), 2)
            r = price / eps
            out.append(f"- 例：股价{price}元、每股收益{eps}元，市盈率约{r:.1f}倍。" if zh else
                       f"- Example: a price of ${price} and EPS of ${eps} give a P/E of about {r:.1f}.")
        elif kind == "pb":
            price, bv = rng.randint(10, 120), round(rng.uniform(5.0, 60.0), 1)
            out.append(f"- 例：股价{price}元、每股净资产{bv}元，市净率约{price / bv:.2f}倍。" if zh else
                       f"- Example: ${price} a share against ${bv} of book value per share is a P/B of "
                       f"{price / bv:.2f}.")
        elif kind == "roe":
            ni, eq = rng.randint(50, 900), rng.randint(400, 6000)
            out.append(f"- 例：净利润{ni}百万、平均权益{eq}百万，ROE为{100 * ni / eq:.1f}%。" if zh else
                       f"- Example: net income of {ni}m on average equity of {eq}m is an ROE of {100 * ni / eq:.1f}%.")
        else:
            debt, eq = rng.randint(100, 3000), rng.randint(500, 5000)
            out.append(f"- 例：债务{debt}百万、权益{eq}百万，债务权益比{debt / eq:.2f}。" if zh else
                       f"- Example: {debt}m of debt against {eq}m of equity is a debt-to-equity ratio of "
                       f"{debt / eq:.2f}.")
    return out
