--
-- PostgreSQL database dump
--

\restrict a9k67sDworXufUapWEBe9YxVq7Efop486IjrD0pB1NwKBFQBvxSkOKz3czHiArr

-- Dumped from database version 15.18 (Debian 15.18-0+deb12u1)
-- Dumped by pg_dump version 15.18 (Debian 15.18-0+deb12u1)

SET statement_timeout = 0;
SET lock_timeout = 0;
SET idle_in_transaction_session_timeout = 0;
SET client_encoding = 'UTF8';
SET standard_conforming_strings = on;
SELECT pg_catalog.set_config('search_path', '', false);
SET check_function_bodies = false;
SET xmloption = content;
SET client_min_messages = warning;
SET row_security = off;

--
-- Data for Name: customers; Type: TABLE DATA; Schema: public; Owner: postgres
--

COPY public.customers (id, name, country) FROM stdin;
1	Customer 1, account 1	US
2	Customer "2"	\N
\.


--
-- Data for Name: orders; Type: TABLE DATA; Schema: public; Owner: postgres
--

COPY public.orders (id, customer_id, status) FROM stdin;
1	2	paid
2	1	paid
3	2	paid
4	1	paid
5	2	paid
\.


--
-- PostgreSQL database dump complete
--

\unrestrict a9k67sDworXufUapWEBe9YxVq7Efop486IjrD0pB1NwKBFQBvxSkOKz3czHiArr

