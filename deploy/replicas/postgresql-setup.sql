-- Creates debugplane's role and database on an existing PostgreSQL (run as
-- a superuser: psql -f postgresql-setup.sql). The replicas create and migrate
-- the schema themselves at start-up (under an advisory lock, so they may
-- start at once). Set the password with \password debugplane and give it to
-- the replicas in ~debugplane/.pgpass.
CREATE ROLE debugplane LOGIN;
CREATE DATABASE debugplane OWNER debugplane;
-- Every acknowledged write must survive the database's crash: keep the
-- default synchronous_commit = on (and, with a standby, synchronous
-- replication if a failover must not lose acknowledged writes).
ALTER DATABASE debugplane SET synchronous_commit = on;
